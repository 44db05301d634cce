#![no_main]

use libfuzzer_sys::fuzz_target;
use weft::fuzzing::MuxOp;

fuzz_target!(|input: (bool, Vec<MuxOp>)| {
    let (dialer, ops) = input;
    weft::fuzzing::mux_core(dialer, ops);
});
