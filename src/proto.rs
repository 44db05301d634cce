//! Protobuf messages of the weft protocol (generated from `proto/`).
#![allow(missing_docs, unreachable_pub)]

include!(concat!(env!("OUT_DIR"), "/weft.v1.rs"));
