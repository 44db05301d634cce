//! How a [`Builder`] makes a [`Connection`] of an established channel:
//! the core resolved from the agreement and the settings, the early
//! stream, the driver spawned, the observer told.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::Instrument;

use super::{
    config::{Builder, MaxWindows},
    connection::Connection,
    core::Multiplexer,
    driver::Driver,
    observe::TrafficReports,
    params::Params,
    reading::ReadSide,
    shared::{Handle, Inner, Shared},
};
use crate::{clock::now, error::CloseCode, handshake::EarlyData, record::Channel};

impl Builder {
    /// Starts the connection over an established channel, spawning its
    /// driver task on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn build<IO>(&self, channel: Channel<IO>) -> Connection
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        self.build_with_early(channel, None, MaxWindows::default())
    }

    /// [`build`](Self::build), with our first stream opened and `early`
    /// written on it before the driver starts: sent already, as early
    /// data, if the channel says the peer accepted it; otherwise the
    /// stream's first frames, as any stream's (docs/PROTOCOL.md, section
    /// 17.4).
    pub(crate) fn build_with_early<IO>(
        &self,
        channel: Channel<IO>,
        early: Option<(Bytes, bool)>,
        max_windows: MaxWindows,
    ) -> Connection
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let agreement = channel.agreement().clone();
        let mut early_data = channel.early_data();
        // Early data we accepted may only open stream 1: anything else,
        // and none of it is acted on (docs/PROTOCOL.md, section 17.2).
        let bad_early = early_data == EarlyData::Accepted
            && agreement.role() == crate::handshake::Role::Acceptor
            && !super::frame::is_early_stream(channel.unread());
        if bad_early {
            early_data = EarlyData::Refused;
        }
        let early_accepted = early_data == EarlyData::Accepted;
        let params = Params::new(&agreement, self, max_windows);
        // With the Plaintext suite the handshake proved who the peer is, but
        // no record after it is authenticated: nothing read can be
        // attributed to it, so the connection names no peer.
        let peer = channel
            .peer()
            .copied()
            .filter(|_| agreement.suite() != crate::handshake::CipherSuite::Plaintext);
        let handshake_time = channel.handshake_time();
        let role = agreement.role();
        let span = tracing::debug_span!(
            "weft::connection",
            role = ?agreement.role(),
            peer = %peer.map_or_else(|| "anonymous".to_string(), |p| p.to_string()),
            version = agreement.version(),
            suite = ?agreement.suite(),
        );
        let (mut reader, writer) = channel.split();
        if bad_early {
            reader.discard_unread();
        }
        let mut core = Multiplexer::new(params, now());
        let mut early_stream = None;
        if let Some((mut data, finish)) = early.filter(|_| role == crate::handshake::Role::Dialer) {
            // The first stream, opened and written before anything else:
            // stream 1, with room for its bytes (a new connection's
            // defaults are far above early data's 3 KiB; the peer checked
            // its own windows before it accepted).
            if let Ok(Some(id)) = core.open(now()) {
                // At most 3 KiB: the stream's send buffer takes it whole.
                let len = data.len();
                let written =
                    core.write(id, &mut data).is_ok_and(|n| n == len) && (!finish || core.finish(id).is_ok());
                if written {
                    if early_accepted {
                        core.sent_early(id, now());
                    }
                    early_stream = Some((id, early_accepted));
                }
            }
        } else if early_accepted && role == crate::handshake::Role::Acceptor {
            // The peer's first stream came in its early data.
            early_stream = Some((1, true));
        }
        let mut shared = Shared::new(core, writer);
        shared.read_buffers = reader.buffer_capacity();
        let mut inner = Inner::new(
            shared,
            ReadSide::new(reader),
            agreement,
            peer,
            handshake_time,
            self.open_timeout,
            span.clone(),
        );
        inner.early_stream = early_stream;
        inner.early_data = early_data;
        let inner = Arc::new(inner);
        let reports = self
            .observer
            .get()
            .map(|observer| TrafficReports::new(observer.clone(), role));
        let driver = Driver::new(inner.clone(), self.record_read_timeout, reports);
        if span.is_disabled() {
            // No subscriber wants the span: entering it on every poll
            // would cost a log record each time with tracing's `log`
            // feature on, for nothing.
            tokio::spawn(driver);
        } else {
            tokio::spawn(driver.instrument(span));
        }
        let conn = Connection {
            handle: Arc::new(Handle { inner }),
        };
        if bad_early {
            tracing::debug!("early data beyond stream 1: closing");
            conn.close(CloseCode::PROTOCOL_ERROR, "early data may only open stream 1");
        }
        if let Some(observer) = self.observer.get() {
            observer.opened(&conn);
        }
        conn
    }
}

impl Connection {
    /// A connection with the default settings over an established channel:
    /// the low-level way, for a channel from a stack without
    /// [`MultiplexLayer`](crate::MultiplexLayer). See [`Builder::build`].
    pub fn new<IO>(channel: Channel<IO>) -> Connection
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        Builder::new().build(channel)
    }

    /// Settings beyond the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }
}
