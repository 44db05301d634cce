//! The record layer: what is sealed and sent, and the [`Channel`] that runs
//! it over a transport.
//!
//! Records are frames (section 3 of docs/PROTOCOL.md) whose payload is
//! sealed under a [`RecordKey`] once a cipher suite is agreed. The sans-IO
//! halves (the sealer and the opener: keys, sizes and buffers, with time
//! passed in) sit behind a thin async shell that polls the transport, once
//! for a whole [`Channel`] and once more for the halves a connection's
//! driver splits it into.
//!
//! How much plaintext each record carries is the [`RecordPolicy`]:
//! [`RecordPolicy::Fixed`] always fills records to one size;
//! [`RecordPolicy::Dynamic`] follows Go's crypto/tls: small records (one TCP
//! segment of payload, [`SEGMENT_RECORD_SIZE`]) until [`BOOST_THRESHOLD`]
//! bytes have been sent, so the first bytes of a response can be opened as
//! soon as their segment arrives; then records grow by [`GROWTH_STEP`] each
//! up to the maximum; after the connection has been idle, small records
//! again. [`RecordSizer`] is the sans-IO state machine (time comes in as an
//! argument); [`RecordSizeLayer`] installs it.

mod aead;
mod buffers;
mod channel;
mod close;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod halves;
mod mac;
mod open;
mod rekey;
mod seal;
mod secretbox;
mod sizer;
mod split;
mod xchacha;

pub use channel::{Channel, ChannelStats};
pub(crate) use sizer::{RecordConfig, RecordPolicy};

pub(crate) use aead::{RecordKey, MAX_TAG_LEN};
pub(crate) use close::MAX_CLOSE_REASON;
pub(crate) use sizer::{RecordSizer, DEFAULT_RECORD_SIZE, MAX_RECORD_SIZE, MIN_RECORD_SIZE};

pub(crate) use aead::{open_frame, seal_frame};
pub(crate) use buffers::Origin;
pub(crate) use channel::{RecordIo, Secured, ABORT_FLUSH_TIMEOUT};
pub(crate) use close::{clear_close_frame, encode_close, parse_close};
pub(crate) use open::READ_CHUNK_MAX;
#[cfg(test)]
pub(crate) use rekey::key_chain_for_tests;
pub(crate) use rekey::MAX_KEY_UPDATES_IN_A_ROW;
pub(crate) use rekey::{hkdf_expand, KeySchedule, UpdatePolicy};
#[cfg(test)]
pub(crate) use split::plaintext;
pub(crate) use split::{ChannelReader, ChannelWriter};
