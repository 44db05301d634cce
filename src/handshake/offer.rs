//! What each layer offers: typed parts of the one Setup message.

use super::CipherSuite;

/// What this side offers the peer, collected from the layers on the way
/// down the stack. [`NegotiateLayer`](crate::NegotiateLayer) adds its
/// versions and application protocols and sends it all as one Setup
/// message (docs/PROTOCOL.md, section 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(super) encryption: Option<EncryptionOffer>,
    pub(super) max_record_size: Option<u32>,
    pub(super) streams: Option<StreamOffer>,
}

impl Offer {
    /// The encryption layer's offer, if one is in the stack.
    pub(crate) fn encryption(&self) -> Option<&EncryptionOffer> {
        self.encryption.as_ref()
    }

    /// The largest record plaintext we accept, if a record layer said.
    pub(crate) fn max_record_size(&self) -> Option<u32> {
        self.max_record_size
    }

    /// The stream limit and windows we declare, if a stream-limit layer said.
    pub(crate) fn streams(&self) -> Option<StreamOffer> {
        self.streams
    }
}

/// The encryption layer's part of the offer: a fresh X25519 public key and
/// the cipher suites we accept, most preferred first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncryptionOffer {
    public_key: [u8; 32],
    suites: Vec<CipherSuite>,
}

impl EncryptionOffer {
    /// An offer of `public_key` and `suites`, most preferred first.
    pub(crate) fn new(public_key: [u8; 32], suites: Vec<CipherSuite>) -> Self {
        Self { public_key, suites }
    }

    /// The ephemeral X25519 public key.
    pub(crate) fn public_key(&self) -> &[u8; 32] {
        &self.public_key
    }

    /// The suites, most preferred first.
    pub(crate) fn suites(&self) -> &[CipherSuite] {
        &self.suites
    }
}

/// The stream-limit layer's part of the offer: how many streams the peer may
/// open at once (the initial stream credit), and optionally the initial
/// flow-control windows we grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamOffer {
    max_streams: u32,
    stream_window: Option<u32>,
    connection_window: Option<u32>,
}

impl StreamOffer {
    /// At most `max_streams` concurrent streams from the peer (at least 1).
    pub(crate) fn new(max_streams: u32) -> Self {
        Self {
            max_streams: max_streams.max(1),
            stream_window: None,
            connection_window: None,
        }
    }

    /// Declares the initial receive windows too (each at least 1 byte).
    pub(crate) fn with_windows(mut self, stream: u32, connection: u32) -> Self {
        self.stream_window = Some(stream.max(1));
        self.connection_window = Some(connection.max(1));
        self
    }

    /// The stream limit.
    pub(crate) fn max_streams(&self) -> u32 {
        self.max_streams
    }

    /// The initial per-stream window, if declared.
    pub(crate) fn stream_window(&self) -> Option<u32> {
        self.stream_window
    }

    /// The initial per-connection window, if declared.
    pub(crate) fn connection_window(&self) -> Option<u32> {
        self.connection_window
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_layer_adds_its_part_of_the_offer() {
        use crate::handshake::CipherSuite;
        use crate::handshake::{EncryptionOffer, Handshake, StreamOffer};

        let mut request = Handshake::dial("127.0.0.1:4000");
        request.offer_streams(StreamOffer::new(100));
        request.offer_record_size(64 * 1024);
        assert_eq!(request.offer().max_record_size(), Some(64 * 1024));
        assert_eq!(request.offer().streams().map(|s| s.max_streams()), Some(100));
        assert!(request.offer().encryption().is_none());
        let _ = EncryptionOffer::new([0; 32], vec![CipherSuite::Aes256Gcm]);
    }
}
