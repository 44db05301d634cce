//! What [`NegotiateLayer`](super::NegotiateLayer) makes: a channel whose
//! Setup exchange is done, and which the encryption layer above (if any)
//! has yet to secure.

use tokio::io::{AsyncRead, AsyncWrite};

use crate::{
    handshake::Agreement,
    record::{Channel, HandshakeState},
};

/// A channel after the Setup exchange, before encryption: the product of
/// [`NegotiateLayer`](super::NegotiateLayer).
///
/// An [`EncryptLayer`](crate::EncryptLayer) directly above (or above a
/// [`RecordSizeLayer`](crate::RecordSizeLayer) over it) turns it into an
/// encrypted [`Channel`]; so does nothing else, so a stack with the
/// encryption in the wrong place does not compile. Without an encryption
/// layer the agreed suite is the plaintext one, and
/// [`StreamLimitLayer`](crate::StreamLimitLayer) or
/// [`MultiplexLayer`](crate::MultiplexLayer) take it as it is (or
/// [`into_plaintext`](Self::into_plaintext) gives the channel).
pub struct Negotiated<IO> {
    channel: Channel<IO>,
    handshake: HandshakeState,
}

impl<IO> std::fmt::Debug for Negotiated<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Negotiated")
            .field("agreement", self.channel.agreement())
            .finish_non_exhaustive()
    }
}

impl<IO> Negotiated<IO> {
    pub(crate) fn new(channel: Channel<IO>, handshake: HandshakeState) -> Self {
        Self { channel, handshake }
    }

    /// What the two Setup messages agreed.
    pub fn agreement(&self) -> &Agreement {
        self.channel.agreement()
    }

    /// The channel, to look at.
    pub fn channel(&self) -> &Channel<IO> {
        &self.channel
    }

    /// The channel, in the clear: the handshake ends here, with no
    /// encryption (and no identity proved), as when the stack has no
    /// [`EncryptLayer`](crate::EncryptLayer).
    pub fn into_plaintext(self) -> Channel<IO>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let mut channel = self.channel;
        channel.set_handshake_time(self.handshake.started.elapsed());
        channel
    }

    pub(crate) fn channel_mut(&mut self) -> &mut Channel<IO> {
        &mut self.channel
    }

    /// The channel and what the encryption step needs of the handshake.
    pub(crate) fn into_parts(self) -> (Channel<IO>, HandshakeState) {
        (self.channel, self.handshake)
    }
}
