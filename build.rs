//! Compiles `proto/` with protox (a pure-Rust protobuf compiler), so no
//! `protoc` or system package is needed.
//!
//! weft's own protos are messages only, but for the health service
//! (`proto/grpc/health/v1/health.proto`, through the RPC code generator
//! into `OUT_DIR/grpc.health.v1.rs`). The example service,
//! `proto/examples/echo.proto`, goes through the RPC code generator
//! (`weft-build`, the workspace's other crate) into
//! `OUT_DIR/weft.examples.rs` for tests and examples.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/weft/v1/setup.proto", "proto/weft/v1/rpc.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;

    // The health service weft serves (`weft::rpc::health`), and the
    // example service of the tests and examples.
    weft_build::compile_protos(&["proto/grpc/health/v1/health.proto"], &["proto"])?;
    weft_build::compile_protos(&["proto/examples/echo.proto"], &["proto"])?;
    Ok(())
}
