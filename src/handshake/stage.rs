//! Seals the traits of a stack's stages (the record size layer's, the
//! encryption layer's, the stream limit's and the multiplexer's): only
//! weft's layers make what they take, so a stack in the wrong order does
//! not compile.

pub trait Sealed {}

impl<IO> Sealed for crate::record::Channel<IO> {}
impl<IO> Sealed for super::Negotiated<IO> {}
