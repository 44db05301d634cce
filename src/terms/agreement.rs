use super::{CipherSuite, Role, Version};

/// What both sides agreed, computed by each from the two Setup messages.
///
/// Available from [`Channel::agreement`](crate::Channel::agreement) once the
/// handshake is done.
#[derive(Debug, Clone)]
pub struct Agreement {
    pub(crate) role: Role,
    pub(crate) version: Version,
    pub(crate) suite: CipherSuite,
    pub(crate) send_record_size: usize,
    pub(crate) recv_record_size: usize,
    pub(crate) peer_max_streams: Option<u32>,
    pub(crate) peer_stream_window: Option<u32>,
    pub(crate) peer_connection_window: Option<u32>,
    pub(crate) local_max_streams: Option<u32>,
    pub(crate) local_stream_window: Option<u32>,
    pub(crate) local_connection_window: Option<u32>,
    pub(crate) protocol: Option<String>,
}

impl Agreement {
    /// Whether we dialed or accepted.
    pub fn role(&self) -> Role {
        self.role
    }
    /// The agreed protocol version: the highest in both ranges.
    pub fn version(&self) -> u32 {
        match self.version {
            Version::V1 => 1,
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }
    /// The agreed version, for behaviour keyed on it.
    pub(crate) fn protocol_version(&self) -> Version {
        self.version
    }
    /// The agreed cipher suite ([`CipherSuite::Plaintext`] when unencrypted).
    pub fn suite(&self) -> CipherSuite {
        self.suite
    }
    /// The largest record plaintext we may send: the peer's limit, capped at
    /// 64 KiB.
    pub fn send_record_size(&self) -> usize {
        self.send_record_size
    }
    /// The largest record plaintext we accept.
    pub fn recv_record_size(&self) -> usize {
        self.recv_record_size
    }
    /// How many concurrent streams the peer lets us open, if it said.
    pub fn peer_max_streams(&self) -> Option<u32> {
        self.peer_max_streams
    }
    /// The per-stream flow-control window the peer grants, if it said.
    pub fn peer_stream_window(&self) -> Option<u32> {
        self.peer_stream_window
    }
    /// How many concurrent streams we allow the peer, if we said
    /// ([`StreamLimitLayer`](crate::StreamLimitLayer)).
    pub fn local_max_streams(&self) -> Option<u32> {
        self.local_max_streams
    }
    /// The per-connection flow-control window the peer grants, if it said.
    pub fn peer_connection_window(&self) -> Option<u32> {
        self.peer_connection_window
    }
    /// The agreed application protocol, if both sides named some.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }
}
