//! The example service, `proto/examples/echo.proto`, through weft's RPC
//! code generator into `OUT_DIR/weft.examples.rs` (for `rpc_bench`).

fn main() -> std::io::Result<()> {
    weft_build::compile_protos(&["../proto/examples/echo.proto"], &["../proto"])
}
