//! docs/SECURITY.md names the tests that check its promises and limits:
//! every test it names must exist where it says, and be a test.
//!
//! Two forms are read: "`a_test` in path/to/file.rs" (one or more names,
//! then the file) and "checked by `a_test`" (one or more names, anywhere in
//! `src/` or `tests/`).

use std::{
    fs,
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).expect("a source file reads");
            out.push((path, text));
        }
    }
}

/// Whether `text` defines a test function `name`: `fn name(` with a test
/// attribute in the lines just above it, or inside a `proptest!` block.
fn defines_test(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().any(|(i, line)| {
        let is_fn = line
            .trim_start()
            .strip_prefix("fn ")
            .or_else(|| line.trim_start().strip_prefix("async fn "))
            .is_some_and(|rest| rest.strip_prefix(name).is_some_and(|r| r.starts_with('(')));
        if !is_fn {
            return false;
        }
        let above = &lines[i.saturating_sub(4)..i];
        above
            .iter()
            .any(|l| l.contains("#[test]") || l.contains("#[tokio::test") || l.contains("#[ignore"))
            || (line.starts_with(char::is_whitespace)
                && lines[..i]
                    .iter()
                    .rev()
                    .take(400)
                    .any(|l| l.trim_start().starts_with("proptest! {")))
    })
}

/// The backticked identifiers at the start of `text`, separated by commas,
/// "and" or "or"; stops at the first other word.
fn leading_names(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix('`') {
        let Some(end) = after.find('`') else { break };
        let name = &after[..end];
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            break;
        }
        names.push(name);
        rest = after[end + 1..].trim_start();
        for joiner in [",", "and ", "or "] {
            rest = rest.strip_prefix(joiner).unwrap_or(rest).trim_start();
        }
    }
    names
}

/// What the document names: (test, Some(file)) for "in file", (test, None)
/// for "checked by".
fn named_tests(doc: &str) -> Vec<(String, Option<String>)> {
    let mut named = Vec::new();
    // "`a`, `b` in path.rs": find each " in src/" or " in tests/" and read
    // the names just before it.
    for (at, _) in doc.match_indices(" in ") {
        let after = &doc[at + 4..];
        let Some(file) = after
            .split(|c: char| c.is_whitespace() || c == ')' || c == ',' || c == ';')
            .next()
            .filter(|f| (f.starts_with("src/") || f.starts_with("tests/")) && f.ends_with(".rs"))
        else {
            continue;
        };
        // Walk back over "`name`, `name` and " to the first backtick run.
        let before = &doc[..at];
        let mut start = before.len();
        let mut backticks = 0;
        for (i, c) in before.char_indices().rev() {
            if c == '`' {
                backticks += 1;
                start = i;
            } else if backticks % 2 == 0 && !(c == ',' || c.is_whitespace() || "andor".contains(c)) {
                break;
            }
        }
        for name in leading_names(&before[start..]) {
            named.push((name.to_owned(), Some(file.to_owned())));
        }
    }
    for (at, _) in doc.match_indices("checked by ") {
        for name in leading_names(&doc[at + "checked by ".len()..]) {
            named.push((name.to_owned(), None));
        }
    }
    named
}

/// The names `doc` gives that are not tests where it says.
fn missing(doc: &str, files: &[(PathBuf, String)]) -> Vec<String> {
    let root = root();
    named_tests(doc)
        .into_iter()
        .filter(|(name, file)| match file {
            Some(file) => !files
                .iter()
                .any(|(path, text)| path == &root.join(file) && defines_test(text, name)),
            None => !files.iter().any(|(_, text)| defines_test(text, name)),
        })
        .map(|(name, file)| format!("{name} in {}", file.as_deref().unwrap_or("the tree")))
        .collect()
}

fn tree() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("tests"), &mut files);
    files
}

#[test]
fn every_test_security_md_names_exists_where_it_says_and_is_a_test() {
    let doc = fs::read_to_string(root().join("docs/SECURITY.md")).expect("docs/SECURITY.md");
    let files = tree();
    let named = named_tests(&doc);
    assert!(named.len() >= 40, "the reader found only {} names", named.len());
    assert_eq!(missing(&doc, &files), Vec::<String>::new());
}

#[test]
fn the_check_fails_for_a_name_or_a_file_that_is_not_there() {
    let files = tree();
    let doc = "checked by `no_such_test_anywhere`; `another_missing_one` and \
               `every_test_security_md_names_exists_where_it_says_and_is_a_test` in tests/mux.rs; \
               `the_check_fails_for_a_name_or_a_file_that_is_not_there` in tests/docs_promises.rs";
    assert_eq!(
        missing(doc, &files),
        [
            "another_missing_one in tests/mux.rs",
            "every_test_security_md_names_exists_where_it_says_and_is_a_test in tests/mux.rs",
            "no_such_test_anywhere in the tree",
        ]
    );
    // A function that is not a test does not count.
    assert_eq!(
        missing("checked by `defines_test`", &files),
        ["defines_test in the tree"]
    );
}
