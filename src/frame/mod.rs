//! Frames: the unit on the wire, a 4-byte header and a payload.
//!
//! ```text
//! +--------+------------------------+=====================+
//! | kind 8 | payload length 24 (BE) | payload ...         |
//! +--------+------------------------+=====================+
//! ```
//!
//! [`FrameCodec`] is a tokio-util [`Decoder`](tokio_util::codec::Decoder)
//! and [`Encoder`](tokio_util::codec::Encoder) for them. It checks the
//! declared length against its maximum before it reserves anything, so a
//! hostile header costs nothing.

mod codec;

pub(crate) use codec::Split;
pub(crate) use codec::{Frame, FrameCodec, HEADER_LEN};
pub(crate) use codec::{FrameError, FrameKind};
