//! Compiles `proto/` with protox (a pure-Rust protobuf compiler), so no
//! `protoc` or system package is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/weft/v1/setup.proto", "proto/weft/v1/rpc.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
