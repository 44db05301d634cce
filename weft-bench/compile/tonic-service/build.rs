fn main() -> Result<(), Box<dyn std::error::Error>> {
    // protox compiles the .proto in Rust, as weft-build does: no protoc.
    let files = protox::compile(["proto/hello.proto"], ["proto"])?;
    tonic_prost_build::compile_fds(files)?;
    Ok(())
}
