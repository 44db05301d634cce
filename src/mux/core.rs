//! The sans-IO multiplexer: frames and time in; frames, timers and events
//! out. No tokio, no clock reads, no sockets.
//!
//! Method families, as in quinn-proto:
//! - input from the network: [`Multiplexer::handle_input`],
//!   [`Multiplexer::handle_eof`], [`Multiplexer::handle_transport_error`],
//!   [`Multiplexer::handle_timeout`];
//! - commands from the application: `open`, `accept`, `write`, `finish`,
//!   `read`, `reset`, `drop_send`, `drop_recv`, `go_away`, `close`;
//! - output: [`Multiplexer::poll_transmit`] (frames),
//!   [`Multiplexer::poll_timeout`] (the next deadline),
//!   [`Multiplexer::poll_event`] (who to wake) and
//!   [`Multiplexer::poll_close`] (when to end the channel, and with what).
//!
//! A driver calls `handle_*` with what arrived, then `poll_transmit` until
//! it yields nothing, then `poll_event` until empty, then `poll_close` and
//! `poll_timeout`.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use bytes::{BufMut, Bytes, BytesMut};

use super::{
    config::{Params, MAX_WINDOW},
    frame::{put_header, Decoder, Input, Kind, CREDIT_ENTRY_LEN, FLAG_FIN, MAX_CONTROL_PAYLOAD, MAX_REASON},
    id_map::IdMap,
};
use crate::{
    error::{CloseCode, Error, Side, Violation},
    handshake::Role,
};

/// Pings answered per transmit at most; more pending pings are dropped (a
/// flood gets no more than this many pongs per batch).
const MAX_PENDING_PONGS: usize = 16;

/// While data arrives, the round trip is measured again this often: under
/// load it includes the queues, which is what window tuning must cover.
const RTT_REFRESH: Duration = Duration::from_millis(100);

/// Data pieces smaller than this are copied into the stream's own buffer
/// rather than kept as slices of the record they arrived in: a tiny slice
/// would pin its whole read-buffer allocation (up to about 192 KiB). This
/// bounds buffered memory to about 12 times the window, whatever sizes the
/// peer chooses, and costs a copy only for small pieces.
const COPY_BELOW: usize = 16 * 1024;

/// Received data waiting for the application: large pieces as they came
/// (zero-copy), small ones copied together into a tail.
#[derive(Debug, Default)]
struct RecvBuffer {
    pieces: VecDeque<Bytes>,
    tail: BytesMut,
}

impl RecvBuffer {
    fn push(&mut self, data: Bytes) {
        if data.len() < COPY_BELOW {
            self.tail.extend_from_slice(&data);
        } else {
            if !self.tail.is_empty() {
                self.pieces.push_back(self.tail.split().freeze());
            }
            self.pieces.push_back(data);
        }
    }

    /// The next piece, at most `max` bytes.
    fn pop(&mut self, max: usize) -> Option<Bytes> {
        if let Some(front) = self.pieces.front_mut() {
            return Some(if front.len() <= max {
                self.pieces.pop_front().expect("front exists")
            } else {
                front.split_to(max)
            });
        }
        if self.tail.is_empty() {
            return None;
        }
        let n = self.tail.len().min(max);
        Some(self.tail.split_to(n).freeze())
    }

    /// Drops everything; returns how many bytes that was.
    fn clear(&mut self) -> usize {
        let n = self.pieces.drain(..).map(|b| b.len()).sum::<usize>() + self.tail.len();
        self.tail = BytesMut::new();
        n
    }
}

/// What the driver must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Stream data, its end, or its failure arrived for a blocked reader.
    Readable(u32),
    /// A blocked writer may write again (or learn its stream failed).
    Writable(u32),
    /// A stream from the peer waits to be accepted.
    Incoming,
    /// The peer granted stream credit, or opening became impossible.
    StreamCredit,
    /// The connection failed or closed: everyone wakes.
    Lost,
}

/// What a read returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    Data(Bytes),
    Fin,
    Blocked,
}

/// A flow-control receive window: how far the peer may send.
#[derive(Debug)]
struct RecvWindow {
    /// Bytes received.
    received: u64,
    /// The offset the peer may send up to.
    limit: u64,
    /// Bytes the application consumed (or we discarded).
    consumed: u64,
    /// The current window (auto-tuned).
    window: u64,
    max: u64,
    /// When the current window was last granted.
    epoch: Instant,
}

impl RecvWindow {
    fn new(window: u64, max: u64, now: Instant) -> Self {
        Self {
            received: 0,
            limit: window,
            consumed: 0,
            window,
            max: max.max(window),
            epoch: now,
        }
    }

    /// Accounts `n` received bytes; `Err(limit)` if that breaks the credit.
    fn receive(&mut self, n: usize) -> Result<(), (u64, u64)> {
        self.received += n as u64;
        if self.received > self.limit {
            return Err((self.received, self.limit));
        }
        Ok(())
    }

    /// Whether enough was consumed (half a window) to return credit.
    fn credit_due(&self) -> bool {
        self.consumed + self.window - self.limit >= self.window / 2
    }

    /// Grants credit up to a window past what was consumed, growing the
    /// window first if the last one was used up within two round trips.
    fn grant(&mut self, now: Instant, rtt: Option<Duration>) -> u32 {
        if let Some(rtt) = rtt {
            if now.saturating_duration_since(self.epoch) < 2 * rtt && self.window < self.max {
                self.window = (self.window * 2).min(self.max);
            }
        }
        self.epoch = now;
        let limit = self.consumed + self.window;
        let increment = limit.saturating_sub(self.limit);
        self.limit = self.limit.max(limit);
        increment as u32
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendPhase {
    Open,
    /// FIN queued behind the data.
    Finishing,
    /// FIN or RESET sent (or received): nothing more goes out.
    Done,
}

#[derive(Debug)]
struct StreamState {
    local: bool,
    // --- sending ---
    send: SendPhase,
    open_sent: bool,
    queue: VecDeque<Bytes>,
    queued: usize,
    send_offset: u64,
    send_limit: u64,
    scheduled: bool,
    /// A RESET to send after whatever of this stream is on the way.
    pending_reset: Option<CloseCode>,
    /// We sent (or queued) a RESET: never a second one.
    reset_sent: bool,
    write_blocked: bool,
    // --- receiving ---
    recv: RecvWindow,
    recv_queue: RecvBuffer,
    /// FIN or RESET arrived: the peer sends nothing more.
    recv_closed: bool,
    /// FIN arrived: the data is complete.
    fin: bool,
    /// The application read to the end (saw the FIN).
    fin_read: bool,
    /// The application does not want the data: drop it on arrival.
    discard: bool,
    credit_listed: bool,
    read_blocked: bool,
    // --- the application ---
    failure: Option<Error>,
    awaiting_accept: bool,
    send_alive: bool,
    recv_alive: bool,
    released: bool,
}

impl StreamState {
    fn new(local: bool, p: &Params, now: Instant) -> Self {
        Self {
            local,
            send: SendPhase::Open,
            open_sent: !local,
            queue: VecDeque::new(),
            queued: 0,
            send_offset: 0,
            send_limit: u64::from(p.peer_stream_window),
            scheduled: false,
            pending_reset: None,
            reset_sent: false,
            write_blocked: false,
            recv: RecvWindow::new(u64::from(p.local_stream_window), p.max_stream_window, now),
            recv_queue: RecvBuffer::default(),
            recv_closed: false,
            fin: false,
            fin_read: false,
            discard: false,
            credit_listed: false,
            read_blocked: false,
            failure: None,
            awaiting_accept: !local,
            send_alive: local,
            recv_alive: local,
            released: false,
        }
    }

    fn send_credit(&self) -> u64 {
        self.send_limit - self.send_offset
    }

    /// Whether a transmit turn would emit anything for this stream.
    fn has_output(&self) -> bool {
        !self.open_sent
            || (self.send == SendPhase::Finishing && self.queued == 0)
            || (self.queued > 0 && self.send_credit() > 0)
            || (self.pending_reset.is_some() && self.send != SendPhase::Finishing)
    }

    /// Both directions closed on the wire: nothing more will arrive or leave.
    fn wire_done(&self) -> bool {
        self.send == SendPhase::Done && self.pending_reset.is_none() && self.recv_closed && self.open_sent
    }
}

/// A snapshot of counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CoreStats {
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    pub(crate) streams_opened: u64,
    pub(crate) streams_accepted: u64,
    pub(crate) frames_sent: u64,
    pub(crate) frames_received: u64,
}

/// The multiplexer state machine of one connection.
#[derive(Debug)]
pub(crate) struct Multiplexer {
    p: Params,
    decoder: Decoder,
    streams: IdMap<StreamState>,
    next_local: u32,
    local_opened: u32,
    local_allowed: u32,
    next_peer: u32,
    peer_opened: u32,
    peer_allowed: u32,
    peer_allowed_sent: u32,
    accept_queue: VecDeque<u32>,
    conn_send_offset: u64,
    conn_send_limit: u64,
    conn_recv: RecvWindow,
    conn_credit_due: bool,
    ready: VecDeque<u32>,
    resets: VecDeque<(u32, CloseCode)>,
    credit_list: Vec<u32>,
    pongs: Vec<u64>,
    ping_due: Option<Instant>,
    ping_outstanding: Option<(u64, Instant)>,
    last_ping: Option<Instant>,
    next_ping: u64,
    rtt: Option<Duration>,
    /// The larger of the smoothed and the latest round trip: what window
    /// tuning uses, so a queue that builds up under load counts at once.
    tuning_rtt: Option<Duration>,
    /// Our graceful go-away: the last peer stream we process.
    go_away_sent: Option<u32>,
    go_away_queued: Option<(u32, CloseCode, String)>,
    peer_go_away: Option<u32>,
    drain_deadline: Option<Instant>,
    /// Every handle is gone: close once our queued output is sent.
    abandoned: bool,
    fatal: Option<Error>,
    close: Option<(CloseCode, String)>,
    last_recv: Instant,
    events: VecDeque<Event>,
    scratch: BytesMut,
    stats: CoreStats,
}

impl Multiplexer {
    /// A multiplexer for a channel established at `now`.
    pub(crate) fn new(p: Params, now: Instant) -> Self {
        let (next_local, next_peer) = match p.role {
            Role::Dialer => (1, 2),
            Role::Acceptor => (2, 1),
        };
        Self {
            decoder: Decoder::default(),
            streams: IdMap::default(),
            next_local,
            local_opened: 0,
            local_allowed: p.peer_max_streams,
            next_peer,
            peer_opened: 0,
            peer_allowed: p.local_max_streams,
            peer_allowed_sent: p.local_max_streams,
            accept_queue: VecDeque::new(),
            conn_send_offset: 0,
            conn_send_limit: u64::from(p.peer_connection_window),
            conn_recv: RecvWindow::new(u64::from(p.local_connection_window), p.max_connection_window, now),
            conn_credit_due: false,
            ready: VecDeque::new(),
            resets: VecDeque::new(),
            credit_list: Vec::new(),
            pongs: Vec::new(),
            // The first ping measures the round trip that window tuning uses.
            ping_due: Some(now),
            ping_outstanding: None,
            last_ping: None,
            next_ping: 1,
            rtt: None,
            tuning_rtt: None,
            go_away_sent: None,
            go_away_queued: None,
            peer_go_away: None,
            drain_deadline: None,
            abandoned: false,
            fatal: None,
            close: None,
            last_recv: now,
            events: VecDeque::new(),
            scratch: BytesMut::new(),
            stats: CoreStats::default(),
            p,
        }
    }

    // ---------------------------------------------------------------- getters

    /// Streams in the table (open, or finished but still held).
    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Smoothed round-trip time from pings, once measured.
    pub(crate) fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    pub(crate) fn stats(&self) -> CoreStats {
        self.stats
    }

    /// The error that ended the connection, if it ended.
    pub(crate) fn error(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// The current receive window of a stream (for tests and stats).
    #[cfg(test)]
    fn stream_window(&self, id: u32) -> Option<u64> {
        self.streams.get(&id).map(|s| s.recv.window)
    }

    /// Bytes buffered for the application across all streams.
    pub(crate) fn buffered(&self) -> u64 {
        self.conn_recv.received - self.conn_recv.consumed
    }

    fn is_local_id(&self, id: u32) -> bool {
        (id % 2 == 1) == (self.p.role == Role::Dialer)
    }

    /// An id that was used before and is no longer in the table.
    fn was_used(&self, id: u32) -> bool {
        id != 0
            && if self.is_local_id(id) {
                id < self.next_local
            } else {
                id < self.next_peer
            }
    }

    // --------------------------------------------------------- network input

    /// Feeds decrypted channel bytes.
    pub(crate) fn handle_input(&mut self, bytes: Bytes, now: Instant) {
        if self.fatal.is_some() {
            return;
        }
        self.last_recv = now;
        let received = self.stats.bytes_received;
        self.decode(bytes, now);
        if self.stats.bytes_received > received && self.ping_outstanding.is_none() {
            // Data is flowing: measure the loaded round trip soon.
            let refresh = self.last_ping.map_or(now, |sent| sent + RTT_REFRESH);
            self.ping_due = Some(self.ping_due.map_or(refresh, |due| due.min(refresh)));
        }
    }

    fn decode(&mut self, mut bytes: Bytes, now: Instant) {
        loop {
            match self.decoder.next(&mut bytes) {
                Ok(Some(input)) => {
                    if let Err(violation) = self.apply(input, now) {
                        self.violation(violation);
                        return;
                    }
                }
                Ok(None) => return,
                Err(violation) => {
                    self.violation(violation);
                    return;
                }
            }
        }
    }

    /// The peer closed the channel cleanly.
    pub(crate) fn handle_eof(&mut self) {
        self.fail(Error::PeerClosed {
            code: CloseCode::NO_ERROR,
            reason: String::new(),
        });
    }

    /// The channel failed (I/O error, truncation, the peer's error close).
    pub(crate) fn handle_transport_error(&mut self, err: Error) {
        self.fail(err);
    }

    /// Time passed: pings, the idle timeout and the drain deadline.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.fatal.is_some() {
            return;
        }
        if let Some(idle) = self.p.idle_timeout {
            if now >= self.last_recv + idle {
                let err = Error::IdleTimeout(idle);
                self.close = Some((CloseCode::IDLE_TIMEOUT, err.to_string()));
                self.fail(err);
                return;
            }
        }
        if self.drain_deadline.is_some_and(|deadline| now >= deadline) {
            self.close = Some((CloseCode::NO_ERROR, "drain deadline passed".into()));
            self.fail(Error::Closed);
        }
    }

    fn violation(&mut self, violation: Violation) {
        tracing::debug!(%violation, "peer violated the protocol");
        let code = violation.code();
        let reason = violation.to_string();
        let last = self.next_peer.saturating_sub(2);
        self.go_away_queued = Some((last, code, reason.clone()));
        self.close = Some((code, reason));
        self.fail(Error::Protocol(violation));
    }

    fn fail(&mut self, err: Error) {
        if self.fatal.is_some() {
            return;
        }
        tracing::debug!(error = %err, "connection ended");
        self.fatal = Some(err);
        self.ready.clear();
        self.events.push_back(Event::Lost);
    }

    fn stream_mut(&mut self, id: u32) -> Result<Option<&mut StreamState>, Violation> {
        if self.streams.contains_key(&id) {
            return Ok(self.streams.get_mut(&id));
        }
        if self.was_used(id) {
            Ok(None)
        } else {
            Err(Violation::UnknownStream(id))
        }
    }

    fn apply(&mut self, input: Input, now: Instant) -> Result<(), Violation> {
        tracing::trace!(?input, "frame in");
        match input {
            Input::Open { stream } => self.on_open(stream, now),
            Input::Data { stream, data } => self.on_data(stream, data),
            Input::Fin { stream } => {
                self.stats.frames_received += 1;
                let s = self.stream_mut(stream)?.ok_or(Violation::ClosedStream(stream))?;
                if s.recv_closed {
                    return Err(Violation::ClosedStream(stream));
                }
                s.recv_closed = true;
                s.fin = true;
                if s.read_blocked {
                    s.read_blocked = false;
                    self.events.push_back(Event::Readable(stream));
                }
                self.settle(stream);
                Ok(())
            }
            Input::Reset { stream, code } => {
                self.stats.frames_received += 1;
                self.on_reset(stream, code);
                Ok(())
            }
            Input::Credit { entries } => {
                self.stats.frames_received += 1;
                for (stream, increment) in entries {
                    self.on_credit(stream, increment)?;
                }
                Ok(())
            }
            Input::StreamCredit { total } => {
                self.stats.frames_received += 1;
                let max_total = (u32::MAX - self.next_local % 2) / 2;
                if total < self.local_allowed || total > max_total {
                    return Err(Violation::BadStreamCredit {
                        had: self.local_allowed,
                        got: total,
                    });
                }
                if total > self.local_allowed {
                    self.local_allowed = total;
                    self.events.push_back(Event::StreamCredit);
                }
                Ok(())
            }
            Input::Ping(opaque) => {
                self.stats.frames_received += 1;
                if self.pongs.len() < MAX_PENDING_PONGS {
                    self.pongs.push(opaque);
                }
                Ok(())
            }
            Input::Pong(opaque) => {
                self.stats.frames_received += 1;
                match self.ping_outstanding {
                    Some((id, sent)) if id == opaque => {
                        let sample = now.saturating_duration_since(sent);
                        let smoothed = match self.rtt {
                            None => sample,
                            Some(rtt) => (rtt * 7 + sample) / 8,
                        };
                        self.rtt = Some(smoothed);
                        self.tuning_rtt = Some(smoothed.max(sample));
                        self.ping_outstanding = None;
                        self.ping_due = self.p.keepalive.map(|interval| now + interval);
                        Ok(())
                    }
                    _ => Err(Violation::UnsolicitedPong),
                }
            }
            Input::GoAway { last, code, reason } => {
                self.stats.frames_received += 1;
                if code != CloseCode::NO_ERROR {
                    self.fail(Error::PeerClosed { code, reason });
                    return Ok(());
                }
                self.peer_go_away = Some(last);
                self.events.push_back(Event::StreamCredit);
                Ok(())
            }
        }
    }

    fn on_open(&mut self, id: u32, now: Instant) -> Result<(), Violation> {
        self.stats.frames_received += 1;
        if self.is_local_id(id) {
            return Err(Violation::WrongParity(id));
        }
        if id < self.next_peer {
            return Err(Violation::StreamReused(id));
        }
        if id > self.next_peer {
            return Err(Violation::StreamGap {
                expected: self.next_peer,
                got: id,
            });
        }
        if self.peer_opened >= self.peer_allowed {
            return Err(Violation::StreamLimit {
                id,
                allowed: self.peer_allowed,
            });
        }
        self.next_peer = self.next_peer.checked_add(2).ok_or(Violation::StreamGap {
            expected: self.next_peer,
            got: id,
        })?;
        self.peer_opened += 1;
        let mut state = StreamState::new(false, &self.p, now);
        if self.go_away_sent.is_some() || self.fatal.is_some() {
            // Crossed our go-away: refused, never seen by the application.
            state.awaiting_accept = false;
            state.discard = true;
            state.send = SendPhase::Done;
            self.streams.insert(id, state);
            self.queue_reset(id, CloseCode::REFUSED_STREAM);
            return Ok(());
        }
        self.streams.insert(id, state);
        self.accept_queue.push_back(id);
        self.events.push_back(Event::Incoming);
        Ok(())
    }

    fn on_data(&mut self, id: u32, data: Bytes) -> Result<(), Violation> {
        let n = data.len();
        self.stats.bytes_received += n as u64;
        let Some(s) = self.streams.get_mut(&id) else {
            return Err(if self.was_used(id) {
                Violation::ClosedStream(id)
            } else {
                Violation::UnknownStream(id)
            });
        };
        if s.recv_closed {
            return Err(Violation::ClosedStream(id));
        }
        s.recv
            .receive(n)
            .map_err(|(offset, limit)| Violation::FlowControl {
                stream: id,
                offset,
                limit,
            })?;
        self.conn_recv
            .receive(n)
            .map_err(|(offset, limit)| Violation::FlowControl {
                stream: 0,
                offset,
                limit,
            })?;
        if s.discard {
            self.consume(id, n);
            return Ok(());
        }
        s.recv_queue.push(data);
        if s.read_blocked {
            s.read_blocked = false;
            self.events.push_back(Event::Readable(id));
        }
        Ok(())
    }

    fn on_reset(&mut self, id: u32, code: CloseCode) {
        if !self.streams.contains_key(&id) {
            // A reset for a stream already gone crossed our own close of
            // it; one for a stream never opened is a violation.
            if !self.was_used(id) {
                self.violation(Violation::UnknownStream(id));
            }
            return;
        }
        let s = self.streams.get_mut(&id).expect("checked above");
        let failure = if code == CloseCode::REFUSED_STREAM {
            Error::Refused
        } else {
            Error::StreamReset {
                code,
                side: Side::Remote,
            }
        };
        let mut dropped = 0;
        if !s.recv_closed {
            s.recv_closed = true;
            if !s.fin {
                dropped = s.recv_queue.clear();
                s.failure.get_or_insert(failure.clone());
            }
        }
        let echo = s.send != SendPhase::Done || s.pending_reset.is_some();
        if echo {
            // Our direction was still open on the wire: close it with an echo
            // so the peer knows nothing more comes.
            s.failure.get_or_insert(failure);
            s.queue.clear();
            s.queued = 0;
            s.send = SendPhase::Done;
            s.pending_reset = None;
        }
        if s.read_blocked {
            s.read_blocked = false;
            self.events.push_back(Event::Readable(id));
        }
        if s.write_blocked {
            s.write_blocked = false;
            self.events.push_back(Event::Writable(id));
        }
        if echo {
            self.queue_reset(id, code);
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.settle(id);
    }

    fn on_credit(&mut self, id: u32, increment: u32) -> Result<(), Violation> {
        if increment == 0 {
            return Err(Violation::ZeroCredit(id));
        }
        if id == 0 {
            self.conn_send_limit += u64::from(increment);
            if self.conn_send_limit - self.conn_send_offset > MAX_WINDOW {
                return Err(Violation::CreditOverflow(0));
            }
            return Ok(());
        }
        let Some(s) = self.stream_mut(id)? else {
            return Ok(()); // credit crossing our close of the stream
        };
        s.send_limit += u64::from(increment);
        if s.send_credit() > MAX_WINDOW {
            return Err(Violation::CreditOverflow(id));
        }
        if !s.scheduled && s.has_output() && s.send != SendPhase::Done {
            s.scheduled = true;
            self.ready.push_back(id);
        }
        Ok(())
    }

    // ------------------------------------------------ application commands

    fn check_open(&self) -> Result<(), Error> {
        match &self.fatal {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    /// Opens a stream: `Ok(None)` while the peer's stream limit is reached.
    pub(crate) fn open(&mut self, now: Instant) -> Result<Option<u32>, Error> {
        self.check_open()?;
        if self.go_away_sent.is_some() {
            return Err(Error::GoingAway {
                code: CloseCode::NO_ERROR,
                side: Side::Local,
            });
        }
        if self.peer_go_away.is_some() {
            return Err(Error::GoingAway {
                code: CloseCode::NO_ERROR,
                side: Side::Remote,
            });
        }
        if self.local_opened >= self.local_allowed {
            return Ok(None);
        }
        let id = self.next_local;
        self.next_local = id.checked_add(2).ok_or(Error::GoingAway {
            code: CloseCode::NO_ERROR,
            side: Side::Local,
        })?;
        self.local_opened += 1;
        self.stats.streams_opened += 1;
        let mut state = StreamState::new(true, &self.p, now);
        state.scheduled = true;
        self.streams.insert(id, state);
        // Scheduled now, so OPEN frames leave in id order.
        self.ready.push_back(id);
        tracing::trace!(stream = id, "opened");
        Ok(Some(id))
    }

    /// The next stream the peer opened: `Ok(None)` if none is waiting.
    pub(crate) fn accept(&mut self) -> Result<Option<u32>, Error> {
        while let Some(id) = self.accept_queue.pop_front() {
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.awaiting_accept = false;
            s.send_alive = true;
            s.recv_alive = true;
            self.stats.streams_accepted += 1;
            return Ok(Some(id));
        }
        match &self.fatal {
            // A clean end, either side's: no more streams, and no error.
            Some(Error::PeerClosed { code, .. }) if *code == CloseCode::NO_ERROR => Ok(None),
            Some(Error::Closed) => Ok(None),
            Some(err) => Err(err.clone()),
            None => Ok(None),
        }
    }

    /// Whether `accept` can never return a stream again.
    pub(crate) fn accept_finished(&self) -> bool {
        self.accept_queue.is_empty() && (self.fatal.is_some() || self.go_away_sent.is_some())
    }

    fn stream_for_app(&mut self, id: u32) -> Result<&mut StreamState, Error> {
        let fatal = self.fatal.clone();
        let s = self.streams.get_mut(&id).ok_or(Error::Closed)?;
        if let Some(err) = &s.failure {
            return Err(err.clone());
        }
        if let Some(err) = fatal {
            return Err(err);
        }
        Ok(s)
    }

    /// Queues data on a stream: how much was taken (0 means blocked: the
    /// send buffer is full; an [`Event::Writable`] follows).
    pub(crate) fn write(&mut self, id: u32, data: Bytes) -> Result<usize, Error> {
        let limit = self.p.send_buffer;
        let s = self.stream_for_app(id)?;
        if s.send != SendPhase::Open {
            return Err(Error::Finished);
        }
        if s.queued >= limit {
            s.write_blocked = true;
            return Ok(0);
        }
        let n = data.len();
        if n == 0 {
            return Ok(0);
        }
        s.queued += n;
        s.queue.push_back(data);
        if !s.scheduled && s.has_output() {
            s.scheduled = true;
            self.ready.push_back(id);
        }
        Ok(n)
    }

    /// Room in a stream's send buffer (0: blocked).
    pub(crate) fn write_room(&mut self, id: u32) -> Result<usize, Error> {
        let limit = self.p.send_buffer;
        let s = self.stream_for_app(id)?;
        if s.send != SendPhase::Open {
            return Err(Error::Finished);
        }
        let room = limit.saturating_sub(s.queued);
        if room == 0 {
            s.write_blocked = true;
        }
        Ok(room)
    }

    /// Half-closes a stream: FIN follows the queued data.
    pub(crate) fn finish(&mut self, id: u32) -> Result<(), Error> {
        let s = self.stream_for_app(id)?;
        match s.send {
            SendPhase::Open => {
                s.send = SendPhase::Finishing;
                if !s.scheduled {
                    s.scheduled = true;
                    self.ready.push_back(id);
                }
                Ok(())
            }
            SendPhase::Finishing | SendPhase::Done => Ok(()),
        }
    }

    /// The next piece of a stream's data, at most `max` bytes.
    pub(crate) fn read(&mut self, id: u32, max: usize) -> Result<ReadOutcome, Error> {
        let fatal = self.fatal.clone();
        let s = self.streams.get_mut(&id).ok_or(Error::Closed)?;
        if let Some(err) = &s.failure {
            if !s.fin {
                return Err(err.clone());
            }
        }
        if let Some(chunk) = s.recv_queue.pop(max) {
            self.consume(id, chunk.len());
            return Ok(ReadOutcome::Data(chunk));
        }
        if s.fin {
            s.fin_read = true;
            self.settle(id);
            return Ok(ReadOutcome::Fin);
        }
        if let Some(err) = fatal {
            return Err(err);
        }
        s.read_blocked = true;
        Ok(ReadOutcome::Blocked)
    }

    /// Returns `n` consumed bytes of stream `id` to the flow-control windows.
    fn consume(&mut self, id: u32, n: usize) {
        self.conn_recv.consumed += n as u64;
        if !self.conn_credit_due && self.conn_recv.credit_due() {
            self.conn_credit_due = true;
        }
        if let Some(s) = self.streams.get_mut(&id) {
            s.recv.consumed += n as u64;
            if !s.recv_closed && !s.credit_listed && s.recv.credit_due() {
                s.credit_listed = true;
                self.credit_list.push(id);
            }
        }
    }

    /// Resets a stream with `code`: both directions, whatever is still open.
    pub(crate) fn reset(&mut self, id: u32, code: CloseCode) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.wire_done() {
            return;
        }
        s.failure.get_or_insert(Error::StreamReset {
            code,
            side: Side::Local,
        });
        s.queue.clear();
        s.queued = 0;
        let reset_needed = s.send != SendPhase::Done || !s.recv_closed;
        s.send = SendPhase::Done;
        let dropped: usize = if s.recv_closed {
            0
        } else {
            s.discard = true;
            s.recv_queue.clear()
        };
        if reset_needed && !s.reset_sent {
            self.queue_reset(id, code);
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.settle(id);
    }

    /// The application dropped its sending half.
    pub(crate) fn drop_send(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.send_alive = false;
        if s.send == SendPhase::Open && s.failure.is_none() && self.fatal.is_none() {
            // Dropped unfinished: the peer must not take it as complete.
            self.reset(id, CloseCode::CANCEL);
        } else {
            self.abandon_if_unwanted(id);
        }
    }

    /// The application dropped its receiving half.
    pub(crate) fn drop_recv(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.recv_alive = false;
        let dropped = s.recv_queue.clear();
        if !s.recv_closed {
            s.discard = true;
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.abandon_if_unwanted(id);
    }

    /// With both halves gone and the peer still sending, tell it to stop
    /// (after our FIN, if one is on its way).
    fn abandon_if_unwanted(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if !s.send_alive && !s.recv_alive && !s.recv_closed && !s.reset_sent && self.fatal.is_none() {
            // The peer's FIN or echo then closes the receiving side.
            self.queue_reset(id, CloseCode::CANCEL);
        }
        self.settle(id);
    }

    /// Queues the one RESET of stream `id`: among the next control frames
    /// if nothing else of the stream is still to go out, otherwise right
    /// after its OPEN or FIN.
    fn queue_reset(&mut self, id: u32, code: CloseCode) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.reset_sent = true;
        if s.open_sent && s.send == SendPhase::Done {
            self.resets.push_back((id, code));
        } else {
            s.pending_reset = Some(code);
            if !s.scheduled {
                s.scheduled = true;
                self.ready.push_back(id);
            }
        }
    }

    /// Gives back the stream credit and the table slot of a finished stream.
    fn settle(&mut self, id: u32) {
        let Some(s) = self.streams.get(&id) else { return };
        if !s.wire_done() || s.awaiting_accept {
            return;
        }
        // The application has seen the end (or the failure), or dropped
        // its receiving half.
        let drained = s.fin_read || !s.fin && s.failure.is_some() || !s.recv_alive;
        if !s.local && !s.released && drained {
            self.peer_allowed += 1;
            self.streams.get_mut(&id).expect("present").released = true;
        }
        let s = &self.streams[&id];
        if !s.send_alive && !s.recv_alive {
            tracing::trace!(stream = id, "stream finished");
            self.streams.remove(&id);
        }
    }

    /// Starts a graceful shutdown: the peer may open no more streams, open
    /// ones finish, then the connection closes (at the latest at `now` plus
    /// the drain timeout).
    pub(crate) fn go_away(&mut self, now: Instant) {
        if self.go_away_sent.is_some() || self.fatal.is_some() {
            return;
        }
        let last = self.next_peer.saturating_sub(2);
        self.go_away_sent = Some(last);
        self.go_away_queued = Some((last, CloseCode::NO_ERROR, String::new()));
        self.drain_deadline = Some(now + self.p.drain_timeout);
        self.events.push_back(Event::StreamCredit);
    }

    /// Every handle is gone: refuse new streams, send what is queued, then
    /// close.
    pub(crate) fn abandon(&mut self, now: Instant) {
        self.go_away(now);
        self.abandoned = true;
    }

    /// Ends the connection now: every stream fails with [`Error::Closed`].
    pub(crate) fn close(&mut self, code: CloseCode, reason: &str) {
        if self.fatal.is_some() {
            return;
        }
        let mut reason = reason.to_owned();
        truncate_utf8(&mut reason, MAX_REASON);
        self.close = Some((code, reason));
        self.fail(Error::Closed);
    }

    // ---------------------------------------------------------------- output

    /// Appends frames to `out` until about `budget` bytes or nothing is
    /// left: control frames first, then one quantum per stream in turn.
    /// Returns the bytes appended.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<Bytes>, budget: usize) -> usize {
        let mut written = 0;
        if self.scratch.capacity() < SCRATCH_LOW {
            // Headers and control frames of many turns share one
            // allocation, rather than one small allocation per frame.
            self.scratch.reserve(SCRATCH_CHUNK);
        }
        if let Some((last, code, reason)) = self.go_away_queued.take() {
            put_header(&mut self.scratch, Kind::GoAway, 0, 0, 8 + reason.len());
            self.scratch.put_u32(last);
            self.scratch.put_u32(code.0);
            self.scratch.put_slice(reason.as_bytes());
            self.stats.frames_sent += 1;
        }
        if self.fatal.is_some() {
            return self.flush_scratch(out);
        }
        for opaque in self.pongs.drain(..) {
            put_header(&mut self.scratch, Kind::Pong, 0, 0, 8);
            self.scratch.put_u64(opaque);
            self.stats.frames_sent += 1;
        }
        if self.ping_outstanding.is_none() && self.ping_due.is_some_and(|due| now >= due) {
            let opaque = self.next_ping;
            self.next_ping += 1;
            put_header(&mut self.scratch, Kind::Ping, 0, 0, 8);
            self.scratch.put_u64(opaque);
            self.ping_outstanding = Some((opaque, now));
            self.last_ping = Some(now);
            self.ping_due = None;
            self.stats.frames_sent += 1;
        }
        self.put_stream_credit();
        self.put_credit(now);
        while let Some((id, code)) = self.resets.pop_front() {
            put_header(&mut self.scratch, Kind::Reset, 0, id, 4);
            self.scratch.put_u32(code.0);
            self.stats.frames_sent += 1;
            self.settle(id);
        }
        written += self.flush_scratch(out);

        while written < budget {
            let Some(id) = self.ready.pop_front() else { break };
            let conn_credit = self.conn_send_limit - self.conn_send_offset;
            let quantum = self.p.quantum;
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.scheduled = false;
            let n = (s.queued as u64)
                .min(s.send_credit())
                .min(conn_credit)
                .min(quantum as u64) as usize;
            if s.open_sent && n == 0 && s.queued > 0 && s.send_credit() > 0 {
                // Blocked on connection credit: keep its turn for later.
                s.scheduled = true;
                self.ready.push_front(id);
                break;
            }
            let fin = s.send == SendPhase::Finishing && n == s.queued;
            let flags = if fin { FLAG_FIN } else { 0 };
            let kind = if !s.open_sent {
                s.open_sent = true;
                Some(Kind::Open)
            } else if n > 0 {
                Some(Kind::Data)
            } else if fin {
                Some(Kind::Fin)
            } else {
                None
            };
            if let Some(kind) = kind {
                let flags = if kind == Kind::Fin { 0 } else { flags };
                put_header(&mut self.scratch, kind, flags, id, n);
                self.stats.frames_sent += 1;
                tracing::trace!(stream = id, ?kind, len = n, fin, "frame out");
            }
            if n > 0 {
                out.push(self.scratch.split().freeze());
                written += HEADER_OVERHEAD;
                let mut left = n;
                while left > 0 {
                    let front = s.queue.front_mut().expect("queued bytes");
                    if front.len() <= left {
                        left -= front.len();
                        out.push(s.queue.pop_front().expect("front exists"));
                    } else {
                        out.push(front.split_to(left));
                        left = 0;
                    }
                }
                s.queued -= n;
                s.send_offset += n as u64;
                self.conn_send_offset += n as u64;
                self.stats.bytes_sent += n as u64;
                written += n;
                if s.write_blocked && s.queued < self.p.send_buffer {
                    s.write_blocked = false;
                    self.events.push_back(Event::Writable(id));
                }
            }
            if fin {
                s.send = SendPhase::Done;
            }
            if s.send != SendPhase::Finishing {
                if let Some(code) = s.pending_reset.take() {
                    s.send = SendPhase::Done;
                    put_header(&mut self.scratch, Kind::Reset, 0, id, 4);
                    self.scratch.put_u32(code.0);
                    self.stats.frames_sent += 1;
                }
            }
            if s.has_output() && s.send != SendPhase::Done {
                s.scheduled = true;
                self.ready.push_back(id);
            }
            self.settle(id);
        }
        // Streams that finished just now give their slot back in the same
        // write as their last frame, not one write later.
        self.put_stream_credit();
        written += self.flush_scratch(out);
        written
    }

    fn put_stream_credit(&mut self) {
        if self.peer_allowed > self.peer_allowed_sent {
            put_header(&mut self.scratch, Kind::StreamCredit, 0, 0, 4);
            self.scratch.put_u32(self.peer_allowed);
            self.peer_allowed_sent = self.peer_allowed;
            self.stats.frames_sent += 1;
        }
    }

    fn flush_scratch(&mut self, out: &mut Vec<Bytes>) -> usize {
        if self.scratch.is_empty() {
            return 0;
        }
        let control = self.scratch.split().freeze();
        let n = control.len();
        out.push(control);
        n
    }

    /// Credit frames for the connection and every stream owed some.
    fn put_credit(&mut self, now: Instant) {
        let mut entries: Vec<(u32, u32)> = Vec::new();
        if self.conn_credit_due {
            self.conn_credit_due = false;
            let increment = self.conn_recv.grant(now, self.tuning_rtt);
            if increment > 0 {
                entries.push((0, increment));
            }
        }
        for id in std::mem::take(&mut self.credit_list) {
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.credit_listed = false;
            if s.recv_closed || s.discard && !s.recv_alive && s.send == SendPhase::Done {
                continue;
            }
            let increment = s.recv.grant(now, self.tuning_rtt);
            if increment > 0 {
                entries.push((id, increment));
            }
        }
        let per_frame = MAX_CONTROL_PAYLOAD / CREDIT_ENTRY_LEN;
        for chunk in entries.chunks(per_frame) {
            put_header(
                &mut self.scratch,
                Kind::Credit,
                0,
                0,
                chunk.len() * CREDIT_ENTRY_LEN,
            );
            for &(id, increment) in chunk {
                self.scratch.put_u32(id);
                self.scratch.put_u32(increment);
            }
            self.stats.frames_sent += 1;
        }
    }

    /// The next deadline at which [`Self::handle_timeout`] (or a transmit,
    /// for a due ping) has work.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.fatal.is_some() {
            return None;
        }
        let idle = self.p.idle_timeout.map(|idle| self.last_recv + idle);
        let ping = if self.ping_outstanding.is_none() {
            self.ping_due
        } else {
            None
        };
        [idle, ping, self.drain_deadline].into_iter().flatten().min()
    }

    /// The next thing to wake someone for.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether the channel should now be closed, and with what. After a
    /// graceful go-away, once no stream is left.
    pub(crate) fn poll_close(&mut self) -> Option<(CloseCode, String)> {
        if self.close.is_none() && self.fatal.is_none() && self.close_due() {
            self.close = Some((CloseCode::NO_ERROR, String::new()));
            self.fail(Error::Closed);
        }
        self.close.clone()
    }

    /// Whether a graceful end is due: drained after a go-away, or every
    /// handle gone and everything sent.
    pub(crate) fn close_due(&self) -> bool {
        let drained = || {
            (self.go_away_sent.is_some() || self.peer_go_away.is_some())
                && self.streams.is_empty()
                && self.accept_queue.is_empty()
        };
        let abandoned_and_sent = || {
            self.abandoned
                && self.go_away_queued.is_none()
                && self.resets.is_empty()
                && self
                    .streams
                    .values()
                    .all(|s| s.awaiting_accept || s.send == SendPhase::Done && s.pending_reset.is_none())
        };
        drained() || abandoned_and_sent()
    }

    /// Whether anything is waiting to be transmitted.
    pub(crate) fn wants_transmit(&self, now: Instant) -> bool {
        self.go_away_queued.is_some()
            || self.fatal.is_none()
                && (!self.pongs.is_empty()
                    || !self.ready.is_empty()
                    || !self.resets.is_empty()
                    || !self.credit_list.is_empty()
                    || self.conn_credit_due
                    || self.peer_allowed > self.peer_allowed_sent
                    || self.ping_outstanding.is_none() && self.ping_due.is_some_and(|due| now >= due))
    }
}

/// The frame-header scratch buffer is refilled in chunks of this size...
const SCRATCH_CHUNK: usize = 4096;
/// ...when less than this is left (room for any control frame but a large
/// credit list, which grows it as needed).
const SCRATCH_LOW: usize = 512;

/// What a data frame's header adds to the byte count.
const HEADER_OVERHEAD: usize = super::frame::HEADER_LEN;

fn truncate_utf8(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
