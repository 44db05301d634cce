fn main() -> std::io::Result<()> {
    weft_build::compile_protos(&["proto/hello.proto"], &["proto"])
}
