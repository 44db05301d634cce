//! Record sizing: how much plaintext each sealed record carries.
//!
//! [`RecordPolicy::Fixed`] always fills records to one size.
//! [`RecordPolicy::Dynamic`] follows Go's crypto/tls: small records (one TCP
//! segment of payload, [`SEGMENT_RECORD_SIZE`]) until [`BOOST_THRESHOLD`]
//! bytes have been sent, so the first bytes of a response can be opened as
//! soon as their segment arrives; then records grow by [`GROWTH_STEP`] each
//! up to the maximum; after the connection has been idle, small records
//! again. [`RecordSizer`] is the sans-IO state machine (time comes in as an
//! argument); [`RecordSizeLayer`] installs it.

mod layer;
mod sizer;

pub use layer::{RecordSize, RecordSizeLayer, DEFAULT_IDLE_RESET};
pub use sizer::{RecordPolicy, RecordSizer, BOOST_THRESHOLD, GROWTH_STEP, SEGMENT_RECORD_SIZE};
