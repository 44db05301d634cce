//! Typed weft RPC clients and servers from `.proto`
//! files, for build scripts.
//!
//! This crate depends only on prost-build and protox, so a build script
//! that uses it compiles none of weft's runtime for the host.
//!
//! [`compile_protos`] compiles with [protox](https://docs.rs/protox) (a
//! protobuf compiler in Rust: no `protoc` to install) and prost-build,
//! into `OUT_DIR`, one file per package (`pkg.rs`): prost's messages and,
//! for each service `Foo`,
//!
//! - `foo_server::Foo`, a trait with one method per RPC to implement, and
//!   `foo_server::FooServer`, the `tower::Service` of
//!   `weft::rpc::server::Call`s around it, for
//!   `weft::rpc::server::Server::builder().add_service(..)`, with
//!   `max_concurrent_calls`;
//! - `foo_client::FooClient`, one async method per RPC, over any
//!   `tower::Service` of `weft::rpc::client::RawCall`s: a
//!   `weft::rpc::client::Client`, or middleware around one.
//!
//! ```toml
//! [dependencies]
//! weft = "0.1"
//! prost = "0.14"
//!
//! [build-dependencies]
//! weft-build = "0.1"
//! ```
//!
//! ```no_run
//! // build.rs
//! fn main() -> std::io::Result<()> {
//!     weft_build::compile_protos(&["proto/echo.proto"], &["proto"])
//! }
//! ```
//!
//! ```ignore
//! // src/lib.rs
//! pub mod echo {
//!     weft::include_proto!("weft.examples");
//! }
//!
//! use echo::{echo_server::{Echo, EchoServer}, EchoReply, EchoRequest};
//! use weft::rpc::{Request, Response, Status};
//!
//! struct MyEcho;
//!
//! impl Echo for MyEcho {
//!     async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
//!         Ok(Response::new(EchoReply { text: request.into_inner().text, ..Default::default() }))
//!     }
//!     // ... one method per RPC; streaming replies are
//!     // `echo_server::ReplyStream<EchoReply>` (`Box::pin(stream)`).
//! }
//!
//! let service = EchoServer::new(MyEcho).max_concurrent_calls(64);
//! ```
//!
//! `weft::include_proto!`'s documentation has the whole
//! of it for one service, compiled as a doc test: the four kinds of
//! handler, the server with a limit, and the generated client.
//!
//! A method's handler is an `async fn` (its future must be `Send`):
//! unary and server-streaming handlers take a `Request<Req>`, client- and
//! bidirectional-streaming ones a `Request<Streaming<Req>>`; server- and
//! bidirectional-streaming handlers answer a
//! `Response<foo_server::ReplyStream<Reply>>`. Client methods take a
//! message or a `Request` around one (with metadata or a timeout), or for
//! streaming requests any `futures::Stream` of messages (or a `Request`
//! around one).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod generator;

use std::{io, path::Path};

pub use generator::Generator;

/// Compiles `protos` (found in `includes`, where their imports are too)
/// into `OUT_DIR`: prost's messages, and weft clients and servers for
/// their services (see the [module docs](self)). Tells cargo to run the
/// build script again when the files change.
pub fn compile_protos(protos: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> io::Result<()> {
    compile_with(prost_build::Config::new(), Generator::new(), protos, includes)
}

/// [`compile_protos`] with a `prost_build::Config` of your own (extern
/// paths, attributes, another output directory) and a [`Generator`]
/// (clients or servers only).
pub fn compile_with(
    mut config: prost_build::Config,
    generator: Generator,
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> io::Result<()> {
    for path in protos {
        println!("cargo:rerun-if-changed={}", path.as_ref().display());
    }
    let files =
        protox::compile(protos, includes).map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
    // And the files they import, where they are on disk (protox has the
    // well-known types built in).
    for file in files.file.iter().filter_map(|file| file.name.as_deref()) {
        if let Some(path) = includes
            .iter()
            .map(|dir| dir.as_ref().join(file))
            .find(|path| path.is_file())
        {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    config.service_generator(Box::new(generator)).compile_fds(files)
}

#[cfg(test)]
mod tests {
    use std::{fs, path::PathBuf};

    use super::{compile_with, Generator};

    /// A fresh directory under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-build-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn compile(name: &str, generator: Generator, proto: &str, file: &str) -> String {
        let dir = scratch(name);
        fs::write(dir.join("test.proto"), proto).unwrap();
        let mut config = prost_build::Config::new();
        config.out_dir(&dir);
        compile_with(config, generator, &[dir.join("test.proto")], &[&dir]).unwrap();
        let out = fs::read_to_string(dir.join(file)).unwrap();
        let _ = fs::remove_dir_all(&dir);
        out
    }

    #[test]
    fn writes_a_server_and_a_client_per_service() {
        let out = compile(
            "echo",
            Generator::new(),
            &fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../proto/examples/echo.proto"
            ))
            .unwrap(),
            "weft.examples.rs",
        );
        for expected in [
            "pub mod echo_server",
            "pub trait Echo: Send + Sync + 'static",
            "const NAME: &'static str = \"weft.examples.Echo\";",
            "\"Say\" =>",
            "\"Chat\" =>",
            "pub mod echo_client",
            "\"weft.examples.Echo/Expand\"",
            "/// Unary: the reply carries the request's text and payload.",
        ] {
            assert!(out.contains(expected), "no {expected:?} in\n{out}");
        }
    }

    #[test]
    fn names_extern_types_as_they_are_and_services_without_a_package_by_name() {
        let proto = r#"
            syntax = "proto3";
            import "google/protobuf/empty.proto";
            import "google/protobuf/timestamp.proto";
            message Key { string key = 1; }
            service KeyValue {
              rpc Delete(Key) returns (google.protobuf.Empty);
              rpc Touched(google.protobuf.Empty) returns (stream google.protobuf.Timestamp);
            }
        "#;
        let out = compile("extern", Generator::new().client(false), proto, "_.rs");
        assert!(out.contains("pub mod key_value_server"), "{out}");
        assert!(out.contains("const NAME: &'static str = \"KeyValue\";"), "{out}");
        assert!(out.contains("Request<super::Key>"), "{out}");
        assert!(out.contains("Response<()>"), "{out}");
        assert!(out.contains("Request<()>"), "{out}");
        assert!(out.contains("ReplyStream<::prost_types::Timestamp>"), "{out}");
        assert!(!out.contains("super::::") && !out.contains("super::()"), "{out}");
        assert!(!out.contains("key_value_client"), "{out}");
    }
}
