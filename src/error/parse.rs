//! Text that does not parse as a weft value.

use std::fmt;

/// Text that does not parse as a weft value: a
/// [`PeerId`](crate::handshake::PeerId) (64 hex digits), a
/// [`CipherSuite`](crate::handshake::CipherSuite) name or an
/// [`Endpoint`](crate::pool::Endpoint) (`host:port`). Its message names
/// what was expected and quotes the text (its first 64 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    expected: &'static str,
    text: String,
}

impl ParseError {
    /// `text` is not `expected` (a phrase: "a peer id (64 hex digits)").
    pub(crate) fn new(expected: &'static str, text: &str) -> Self {
        Self {
            expected,
            text: text.chars().take(64).collect(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not {}", self.text, self.expected)
    }
}

impl std::error::Error for ParseError {}
