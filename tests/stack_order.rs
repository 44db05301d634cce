//! A misordered stack does not compile, and the compiler's error names the
//! layer and what it was given (the `diagnostic::on_unimplemented`
//! messages of src/stack.rs's promise). rustdoc's `compile_fail` checks
//! only the error code; this checks the words, by running `cargo check` on
//! a scratch crate that depends on weft: four stacks in the wrong order,
//! each with its own message, a transport acceptor where a stack belongs
//! (`weft::stack::Acceptor`'s message), and one in the right order, which
//! compiles.
//!
//! The scratch crate builds in its own target directory under cargo's
//! test scratch space, offline, with weft's lockfile: the first run checks
//! weft's dependencies (about a minute on 2 cores), later runs reuse it.

use std::{fs, path::PathBuf, process::Command};

const STACKS: &str = r#"
use tower::ServiceBuilder;
use weft::{
    handshake::Versions, mux, transport::TcpAcceptor, EncryptLayer, Identity, MultiplexLayer,
    NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

fn serve_with(_: impl weft::stack::Acceptor) {}

pub fn in_order() {
    serve_with(
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(StreamLimitLayer::new(8))
            .layer(RecordSizeLayer::dynamic())
            .layer(EncryptLayer::new(Identity::generate()))
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpAcceptor::new()),
    );
}

pub fn stream_limit_below_record_sizes() {
    serve_with(
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(RecordSizeLayer::dynamic())
            .layer(StreamLimitLayer::new(8))
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpAcceptor::new()),
    );
}

pub fn encrypting_twice() {
    serve_with(
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(EncryptLayer::new(Identity::generate()))
            .layer(EncryptLayer::new(Identity::generate()))
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpAcceptor::new()),
    );
}

pub fn stream_limit_over_the_connector() {
    serve_with(
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(StreamLimitLayer::new(8))
            .service(TcpAcceptor::new()),
    );
}

pub fn no_negotiation_below_the_multiplexer() {
    serve_with(
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .service(TcpAcceptor::new()),
    );
}

pub fn a_transport_acceptor_alone() {
    serve_with(TcpAcceptor::new());
}

fn pool_with(_: impl weft::pool::Dialer) {}

pub fn a_connector_alone() {
    pool_with(weft::transport::Connector::new());
}
"#;

#[test]
fn a_misordered_stack_is_a_compile_error_that_names_the_layer() {
    let weft = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stack_order");
    fs::create_dir_all(scratch.join("src")).unwrap();
    fs::write(
        scratch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"stack-order\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [workspace]\n\n[dependencies]\n\
             weft = {{ path = {:?}, default-features = false }}\n\
             tower = {{ version = \"0.5\", default-features = false }}\n",
            weft.display().to_string()
        ),
    )
    .unwrap();
    fs::copy(weft.join("Cargo.lock"), scratch.join("Cargo.lock")).unwrap();
    fs::write(scratch.join("src/lib.rs"), STACKS).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&scratch)
        .args(["check", "--offline", "--quiet", "--message-format=short"])
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(!out.status.success(), "the misordered stacks compiled");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error")).collect();
    // A layer over the wrong layer: the message names both. A layer
    // straight over the connector, where `NegotiateLayer` belongs: the
    // connector is not a `Service<Handshake<_>>` (tower's trait, whose
    // message weft cannot set).
    let expected = [
        (24, "`RecordSizeLayer` cannot size the records of `StreamLimited<"),
        (35, "`EncryptLayer` cannot encrypt `Channel<"),
        (46, "`TcpAcceptor: Service<Handshake<"),
        (55, "`TcpAcceptor: Service<Handshake<"),
        // A transport acceptor where a stack belongs: the message says
        // what a stack is.
        (62, "`TcpAcceptor` is not an acceptor stack over `"),
        (68, "`Connector` is not a dialer stack"),
    ];
    for (line, message) in expected {
        let place = format!("src/lib.rs:{line}:");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with(&place) && e.contains("E0277") && e.contains(message)),
            "no error at line {line} says {message:?}:\n{stderr}"
        );
    }
    // Each misordered stack is reported (a stack may give more than one
    // error, through both bounds of `Acceptor`), and the one in order
    // gives none: no error points into `in_order`, lines 10-20.
    for error in &errors {
        let line: usize = error
            .split(':')
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("an error with a place: {error}"));
        assert!(!(10..=20).contains(&line), "the stack in order failed: {error}");
    }
}
