//! Compiles `proto/` with protox (a pure-Rust protobuf compiler), so no
//! `protoc` or system package is needed.
//!
//! weft's own protos are messages only. The example service,
//! `proto/examples/echo.proto`, goes through the RPC code generator of
//! `weft::build` (the same source, included here: a crate cannot depend
//! on itself), into `OUT_DIR/weft.examples.rs` for tests and examples.

#[path = "src/build/generator.rs"]
#[allow(dead_code)]
mod generator;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/weft/v1/setup.proto", "proto/weft/v1/rpc.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;

    let examples = ["proto/examples/echo.proto"];
    println!("cargo:rerun-if-changed=src/build/generator.rs");
    for file in examples {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(examples, ["proto"])?;
    prost_build::Config::new()
        .service_generator(Box::new(generator::Generator::new()))
        .compile_fds(descriptors)?;
    Ok(())
}
