//! Imports point down: each folder of `src/` (and each top-level file
//! that is a module of its own) imports only the folders declared below
//! it in [`LAYERS`], and the files of `src/mux` import one another
//! without a cycle. Read from the source, as `use crate::...` and
//! `crate::...` paths (and `super::...` inside `src/mux`), so a new
//! upward import fails here, naming the file.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The folders of `src`, lowest first: each may import only those before
/// it. Observers (the metrics, the live view) and the fuzzing entry
/// points sit on top: they import the domains, never the reverse.
const LAYERS: &[&str] = &[
    // Foundations: no domain of their own.
    "bucket",
    "clock",
    "sync",
    "terms",
    "proto",
    "frame",
    "error",
    "sim",
    // The channel: records, transports, keys, the handshake.
    "record",
    "transport",
    "crypto",
    "handshake",
    "admission",
    // Connections, and what is built of them.
    "mux",
    "pool",
    "stack",
    "discover",
    "server",
    "standard",
    "http",
    "rpc",
    // The standard stacks compiled once for debug builds (instances.rs).
    "instances",
    // What observes the rest, and what tests it from outside.
    "admin",
    "metrics",
    "fuzzing",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// `text` without its `//` comments (doc comments included: a link in a
/// doc is not an import).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first names of the paths that follow `prefix` (`crate::`, say):
/// `crate::mux::Connection` gives `mux`, and `crate::{mux::X, pool}`
/// gives `mux` and `pool`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        // Not the tail of a longer path (`super::super::` is looked for
        // by its own prefix).
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The names at the group's first depth.
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 1 && c != '{' && c != '}' && c != ',' {
                    item.push(c);
                }
                if (c == ',' && depth == 1) || depth == 0 {
                    if let Some(name) = first_word(&item) {
                        names.insert(name);
                    }
                    item.clear();
                }
                if depth == 0 {
                    break;
                }
            }
        } else if let Some(name) = first_word(rest) {
            names.insert(name);
        }
    }
    names
}

fn first_word(text: &str) -> Option<String> {
    let word: String = text
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The module of `src` a file belongs to: its folder, or the file itself.
fn top_module(path: &Path) -> String {
    let relative = path.strip_prefix(src()).unwrap();
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    first.trim_end_matches(".rs").to_owned()
}

#[test]
fn every_folder_imports_only_the_folders_below_it() {
    let mut upward = Vec::new();
    let mut seen = BTreeSet::new();
    for path in files(&src()) {
        let module = top_module(&path);
        if module == "lib" {
            continue;
        }
        seen.insert(module.clone());
        let Some(level) = LAYERS.iter().position(|l| *l == module) else {
            panic!("{module} (src/{module}) is in no layer: add it to LAYERS, above what it imports");
        };
        for name in names_after(&code(&fs::read_to_string(&path).unwrap()), "crate::") {
            if name == module {
                continue;
            }
            if let Some(imported) = LAYERS.iter().position(|l| *l == name) {
                if imported > level {
                    upward.push(format!(
                        "{} imports {name}, a layer above {module}",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up:\n{}", upward.join("\n"));
    let missing: Vec<_> = LAYERS.iter().filter(|l| !seen.contains(**l)).collect();
    assert!(
        missing.is_empty(),
        "LAYERS names modules that are gone: {missing:?}"
    );
}

/// The files and folders of `src/mux`, by name, and what each imports of
/// the others (through `super::`, `crate::mux::` and the names mod.rs
/// re-exports).
fn mux_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mux = src().join("mux");
    let mod_rs = code(&fs::read_to_string(mux.join("mod.rs")).unwrap());
    // `pub use config::Builder;`: `super::Builder` is `config`'s.
    let mut reexported = BTreeMap::new();
    for line in mod_rs.lines().map(str::trim) {
        let Some(path) = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let Some((module, names)) = path.trim_end_matches(';').split_once("::") else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            let name = name.split(" as ").last().unwrap().trim();
            if !name.is_empty() && name != "self" {
                reexported.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    let units: BTreeSet<String> = fs::read_dir(&mux)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "mod.rs")
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    let mut graph = BTreeMap::new();
    for path in files(&mux) {
        let relative = path.strip_prefix(&mux).unwrap();
        if relative == Path::new("mod.rs") {
            continue;
        }
        let unit = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs")
            .to_owned();
        let text = code(&fs::read_to_string(&path).unwrap());
        // From a file of mux itself `super::` is mux; from a subfolder's
        // top file too (`core/mod.rs`); deeper, `super::super::`.
        let direct = relative.components().count() == 1 || relative.ends_with("mod.rs");
        let mut names = names_after(&text, "crate::mux::");
        names.extend(names_after(
            &text,
            if direct { "super::" } else { "super::super::" },
        ));
        let imports: BTreeSet<String> = names
            .into_iter()
            .map(|name| reexported.get(&name).cloned().unwrap_or(name))
            .filter(|name| units.contains(name) && *name != unit)
            .collect();
        graph.entry(unit).or_insert_with(BTreeSet::new).extend(imports);
    }
    graph
}

#[test]
fn the_files_of_mux_import_one_another_without_a_cycle() {
    let graph = mux_graph();
    assert!(graph.len() > 10, "mux's files were read: {graph:?}");
    assert!(
        graph["connection"].contains("shared") && graph["build"].contains("connection"),
        "the reading sees imports, through paths and re-exports: {graph:?}"
    );
    // Kahn's algorithm: what is left once nothing more can be placed is
    // a cycle.
    let mut placed = BTreeSet::new();
    loop {
        let ready: Vec<String> = graph
            .iter()
            .filter(|(unit, imports)| !placed.contains(*unit) && imports.iter().all(|i| placed.contains(i)))
            .map(|(unit, _)| unit.clone())
            .collect();
        if ready.is_empty() {
            break;
        }
        placed.extend(ready);
    }
    let cyclic: BTreeMap<_, _> = graph
        .iter()
        .filter(|(unit, _)| !placed.contains(*unit))
        .map(|(unit, imports)| {
            (
                unit,
                imports
                    .iter()
                    .filter(|i| !placed.contains(*i))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    assert!(
        cyclic.is_empty(),
        "files of src/mux in an import cycle: {cyclic:?}"
    );
}

#[test]
fn the_reading_of_paths_finds_groups_and_skips_longer_paths() {
    let names = names_after(
        "use crate::{mux::{a, b}, pool::X, rpc};\nlet x = crate::http::y; other::crate::z;",
        "crate::",
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["http", "mux", "pool", "rpc"]
    );
    assert_eq!(code("let a = 1; // crate::admin\nb"), "let a = 1; \nb");
}

/// The connection's I/O policy (`src/mux/arbiter`) has no I/O of its own:
/// it imports nothing, neither tokio nor a waker, a clock or another file
/// of the multiplexer, so its decisions are what its unit tests see.
#[test]
fn the_arbiter_imports_nothing() {
    let path = src().join("mux/arbiter/mod.rs");
    let text = code(&fs::read_to_string(&path).unwrap());
    let imports: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("use ") || line.contains("crate::") || line.contains("super::"))
        .collect();
    assert!(imports.is_empty(), "{} imports: {imports:?}", path.display());
    for io in ["tokio", "Waker", "Instant", "std::io", "std::sync"] {
        assert!(!text.contains(io), "{} names {io}", path.display());
    }
}
