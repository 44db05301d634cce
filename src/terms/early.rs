/// What became of early data (0-RTT, protocol version 3) on a connection:
/// [`Connection::early_data`](crate::mux::Connection::early_data).
///
/// The same on both ends: a dialer's early data the acceptor accepted is
/// `Accepted` on both; refused, `Refused` on both (the dialer sent its
/// request again after the handshake). One exception: early data that
/// opens and verifies but is not one first stream (no weft dialer sends
/// that) is `Accepted` for its dialer and `Refused` by the acceptor, which
/// discards it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EarlyData {
    /// None was sent: the dialer did not know the acceptor's box key, the
    /// first stream was not one that may go early, or version 3 was not
    /// agreed.
    #[default]
    None,
    /// Sent and accepted: the first stream's request was answered in the
    /// first round trip.
    Accepted,
    /// Sent and refused (replayed, too old, the acceptor loaded, its box
    /// key gone, ...): the request went again after the handshake, one
    /// round trip later.
    Refused,
}

impl EarlyData {
    /// The outcome's name for a label: `none`, `accepted` or `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Accepted => "accepted",
            Self::Refused => "refused",
        }
    }
}
