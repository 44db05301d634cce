//! The pool's bookkeeping, behind one lock: the connections of each
//! endpoint, the dial in flight, the backoff after failed dials, and what
//! a checkout does next. Nothing here awaits; the pool's async shell
//! ([`super::Pool`]) carries out the steps it returns.

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};

use super::{observe::Reports, Config, Endpoint, EndpointStats, PoolError, PoolStats};
use crate::mux::{Connection, Stream};

/// How a dial ended, for everyone waiting on it.
pub(crate) type DialOutcome = Option<Result<(), PoolError>>;

/// A connection the pool holds.
pub(crate) struct Pooled {
    pub(crate) conn: Connection,
    /// Streams the pool opened on it.
    streams: u64,
    /// When the sweep first saw it without streams.
    idle_since: Option<Instant>,
}

#[derive(Default)]
struct EndpointState {
    conns: Vec<Pooled>,
    /// The dial in flight: callers that find no stream wait on it rather
    /// than dial again.
    dial: Option<watch::Receiver<DialOutcome>>,
    /// Dials failed in a row, and until when the next one waits.
    failures: u32,
    backoff_until: Option<Instant>,
    last_error: Option<Arc<PoolError>>,
}

/// Counters for [`super::PoolStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) dials: u64,
    pub(crate) dial_failures: u64,
    pub(crate) streams_opened: u64,
    pub(crate) reuses: u64,
    pub(crate) retries: u64,
    pub(crate) evicted: u64,
    pub(crate) idle_closed: u64,
}

#[derive(Default)]
pub(crate) struct State {
    endpoints: HashMap<Endpoint, EndpointState>,
    /// Pooled connections and dials in flight, every endpoint.
    pub(crate) connections: usize,
    pub(crate) dialing: usize,
    pub(crate) waiters: usize,
    pub(crate) counters: Counters,
    /// What the pool's observer was told.
    pub(crate) reports: Reports,
}

/// What a checkout does next.
pub(crate) enum Step {
    /// A stream, opened on this connection.
    Opened(Stream, Connection),
    /// The connection asked for ([`State::connection_step`]).
    Connection(Connection),
    /// Wait for the dial in flight, then look again.
    WaitDial(watch::Receiver<DialOutcome>),
    /// Start a dial (its slot is counted already), then wait for it.
    Dial(watch::Sender<DialOutcome>, watch::Receiver<DialOutcome>),
    /// Every connection is at the peer's stream limit and no other may be
    /// dialed: wait for any of these to free a stream.
    WaitSlot(Vec<Connection>),
    /// The pool is at its connection limit with nothing idle to close:
    /// wait for a change.
    WaitPool,
    /// Fail the call.
    Fail(PoolError),
}

/// Endpoints remembered at once with nothing pooled and no dial (only
/// their dials' failures, for the backoff): past it, those are forgotten,
/// so that a caller that names endpoint after endpoint (URIs from
/// strangers, say) cannot grow the pool without bound.
const MAX_REMEMBERED_ENDPOINTS: usize = 4096;

/// The state of `endpoint`, made if it has none (forgetting the endpoints
/// that hold only a backoff when there are too many).
fn endpoint_state<'a>(
    endpoints: &'a mut HashMap<Endpoint, EndpointState>,
    endpoint: &Endpoint,
) -> &'a mut EndpointState {
    if endpoints.len() >= MAX_REMEMBERED_ENDPOINTS && !endpoints.contains_key(endpoint) {
        endpoints.retain(|_, es| !es.conns.is_empty() || es.dial.is_some());
    }
    endpoints.entry(endpoint.clone()).or_default()
}

impl State {
    /// Endpoints remembered now.
    #[cfg(test)]
    pub(crate) fn endpoints(&self) -> usize {
        self.endpoints.len()
    }

    /// One look at `endpoint`: a stream on a pooled connection (other than
    /// `avoid`) if one has room, else whatever gets one soonest (`avoid`
    /// among them only at the pool's limit).
    pub(crate) fn stream_step(
        &mut self,
        endpoint: &Endpoint,
        config: &Config,
        now: Instant,
        avoid: Option<&Connection>,
    ) -> Step {
        self.evict_closed(endpoint);
        let es = endpoint_state(&mut self.endpoints, endpoint);
        let avoided = |conn: &Connection| avoid.is_some_and(|avoid| avoid.same_as(conn));
        for pooled in es
            .conns
            .iter_mut()
            .filter(|p| !p.conn.is_going_away() && !avoided(&p.conn))
        {
            if let Ok(Some(stream)) = pooled.conn.try_open() {
                if pooled.streams > 0 {
                    self.counters.reuses += 1;
                }
                pooled.streams += 1;
                pooled.idle_since = None;
                self.counters.streams_opened += 1;
                return Step::Opened(stream, pooled.conn.clone());
            }
        }
        self.grow_step(endpoint, config, now, Step::WaitSlot)
    }

    /// One look for a connection to `endpoint`: one with stream credit
    /// left if any, else any live one, else a dial.
    pub(crate) fn connection_step(&mut self, endpoint: &Endpoint, config: &Config, now: Instant) -> Step {
        self.evict_closed(endpoint);
        let es = endpoint_state(&mut self.endpoints, endpoint);
        let mut live = es.conns.iter().filter(|p| !p.conn.is_going_away());
        let first = live.clone().next().map(|p| p.conn.clone());
        if let Some(roomy) = live.find(|p| p.conn.available_streams() > 0) {
            return Step::Connection(roomy.conn.clone());
        }
        if let Some(conn) = first {
            return Step::Connection(conn);
        }
        self.grow_step(endpoint, config, now, |_| Step::WaitPool)
    }

    /// Nothing pooled could serve: wait for the dial in flight, dial, or,
    /// at the limits, `saturated`.
    fn grow_step(
        &mut self,
        endpoint: &Endpoint,
        config: &Config,
        now: Instant,
        saturated: impl FnOnce(Vec<Connection>) -> Step,
    ) -> Step {
        let es = self.endpoints.get_mut(endpoint).expect("looked up by the caller");
        if let Some(dial) = &es.dial {
            return Step::WaitDial(dial.clone());
        }
        let live: Vec<Connection> = es
            .conns
            .iter()
            .filter(|p| !p.conn.is_going_away())
            .map(|p| p.conn.clone())
            .collect();
        if live.len() >= config.max_per_endpoint {
            return saturated(live);
        }
        if let (Some(until), Some(last)) = (es.backoff_until, &es.last_error) {
            if until > now {
                return Step::Fail(PoolError::Backoff {
                    endpoint: endpoint.clone(),
                    retry_in: until - now,
                    failures: es.failures,
                    source: last.clone(),
                });
            }
        }
        if self.connections >= config.max_connections && !self.close_one_idle(endpoint) {
            return Step::WaitPool;
        }
        let es = self.endpoints.get_mut(endpoint).expect("looked up by the caller");
        let (tx, rx) = watch::channel(None);
        es.dial = Some(rx.clone());
        self.connections += 1;
        self.dialing += 1;
        Step::Dial(tx, rx)
    }

    /// The dial for `endpoint` ended.
    pub(crate) fn dial_done(
        &mut self,
        endpoint: &Endpoint,
        result: Result<Connection, PoolError>,
        config: &Config,
        now: Instant,
    ) -> Result<(), PoolError> {
        self.dialing -= 1;
        let es = endpoint_state(&mut self.endpoints, endpoint);
        es.dial = None;
        match result {
            Ok(conn) => {
                es.conns.push(Pooled {
                    conn,
                    streams: 0,
                    idle_since: None,
                });
                es.failures = 0;
                es.backoff_until = None;
                es.last_error = None;
                self.counters.dials += 1;
                self.reports.dialed(endpoint, true);
                self.reports.connections(endpoint, es.conns.len());
                Ok(())
            }
            Err(err) => {
                self.connections -= 1;
                es.failures += 1;
                es.backoff_until = Some(now + config.backoff.delay(es.failures));
                es.last_error = Some(Arc::new(err.clone()));
                self.counters.dial_failures += 1;
                self.reports.dialed(endpoint, false);
                Err(err)
            }
        }
    }

    /// Drops the endpoint's connections that have ended: a broken
    /// connection goes at the next look, not after a timer.
    fn evict_closed(&mut self, endpoint: &Endpoint) {
        if let Some(es) = self.endpoints.get_mut(endpoint) {
            let before = es.conns.len();
            es.conns.retain(|p| !p.conn.is_closed());
            let gone = before - es.conns.len();
            self.connections -= gone;
            self.counters.evicted += gone as u64;
            if gone > 0 {
                self.reports.connections(endpoint, es.conns.len());
            }
        }
    }

    /// At the pool's limit: closes (gracefully) the connection idle the
    /// longest at another endpoint, if any has no streams.
    fn close_one_idle(&mut self, except: &Endpoint) -> bool {
        let mut oldest: Option<(&Endpoint, usize, Instant)> = None;
        let now = Instant::now();
        for (endpoint, es) in &self.endpoints {
            if endpoint == except {
                continue;
            }
            for (i, p) in es.conns.iter().enumerate() {
                if p.conn.stats().open_streams == 0 {
                    let since = p.idle_since.unwrap_or(now);
                    if oldest.is_none_or(|(_, _, t)| since < t) {
                        oldest = Some((endpoint, i, since));
                    }
                }
            }
        }
        let Some((endpoint, i, _)) = oldest else {
            return false;
        };
        let endpoint = endpoint.clone();
        let es = self.endpoints.get_mut(&endpoint).expect("found above");
        let pooled = es.conns.remove(i);
        self.reports.connections(&endpoint, es.conns.len());
        pooled.conn.go_away();
        self.connections -= 1;
        self.counters.idle_closed += 1;
        true
    }

    /// The periodic sweep: drops ended connections, and closes those that
    /// have had no stream for `idle_timeout`, and the longest idle past
    /// `max_idle` connections without streams; forgets endpoints with
    /// nothing pooled once their last failure's backoff is `max_backoff`
    /// past (so that a backoff keeps growing while dials keep failing).
    /// Returns whether any connection went.
    pub(crate) fn sweep(
        &mut self,
        idle_timeout: Duration,
        max_idle: usize,
        max_backoff: Duration,
        now: Instant,
    ) -> bool {
        let mut gone = 0;
        let mut idle = 0;
        for es in self.endpoints.values_mut() {
            es.conns.retain_mut(|p| {
                if p.conn.is_closed() {
                    gone += 1;
                    return false;
                }
                if p.conn.stats().open_streams > 0 {
                    p.idle_since = None;
                    return true;
                }
                let since = *p.idle_since.get_or_insert(now);
                if now.duration_since(since) >= idle_timeout {
                    p.conn.go_away();
                    idle += 1;
                    return false;
                }
                true
            });
        }
        // Past the cap on idle connections, the longest idle go.
        let mut idlers: Vec<Instant> = self
            .endpoints
            .values()
            .flat_map(|es| es.conns.iter().filter_map(|p| p.idle_since))
            .collect();
        if idlers.len() > max_idle {
            idlers.sort_unstable();
            let cutoff = idlers[idlers.len() - max_idle - 1];
            let mut extra = idlers.len() - max_idle;
            for es in self.endpoints.values_mut() {
                es.conns.retain(|p| match p.idle_since {
                    Some(since) if extra > 0 && since <= cutoff => {
                        p.conn.go_away();
                        extra -= 1;
                        idle += 1;
                        false
                    }
                    _ => true,
                });
            }
        }
        if gone + idle > 0 {
            for (endpoint, es) in &self.endpoints {
                self.reports.connections(endpoint, es.conns.len());
            }
        }
        self.endpoints.retain(|_, es| {
            !es.conns.is_empty()
                || es.dial.is_some()
                || es.backoff_until.is_some_and(|t| t + max_backoff > now)
        });
        self.connections -= gone + idle;
        self.counters.evicted += gone as u64;
        self.counters.idle_closed += idle as u64;
        gone + idle > 0
    }

    /// The pool's counters.
    pub(crate) fn stats(&self) -> PoolStats {
        let c = &self.counters;
        PoolStats {
            dials: c.dials,
            dial_failures: c.dial_failures,
            streams_opened: c.streams_opened,
            reuses: c.reuses,
            retries: c.retries,
            evicted: c.evicted,
            idle_closed: c.idle_closed,
            connections: self.pooled(),
            dialing: self.dialing,
            waiters: self.waiters,
            streams_per_connection: self.streams_per_connection(),
        }
    }

    /// Each endpoint and what the pool holds for it.
    pub(crate) fn endpoint_stats(&self) -> Vec<EndpointStats> {
        self.endpoints
            .iter()
            .map(|(endpoint, es)| EndpointStats {
                endpoint: endpoint.clone(),
                connections: es.conns.iter().map(|p| p.conn.id()).collect(),
                dialing: es.dial.is_some(),
                failures: es.failures,
            })
            .collect()
    }

    /// Streams the peer's limit counts on each pooled connection.
    fn streams_per_connection(&self) -> Vec<usize> {
        self.endpoints
            .values()
            .flat_map(|es| es.conns.iter().map(|p| p.conn.stats().streams_counted as usize))
            .collect()
    }

    /// Pooled connections (dials in flight not counted).
    fn pooled(&self) -> usize {
        self.endpoints.values().map(|es| es.conns.len()).sum()
    }

    /// The pooled connections to `endpoint`, for tests and stats.
    pub(crate) fn connections_to(&self, endpoint: &Endpoint) -> Vec<Connection> {
        self.endpoints
            .get(endpoint)
            .map(|es| es.conns.iter().map(|p| p.conn.clone()).collect())
            .unwrap_or_default()
    }

    /// A stream was opened on `conn` outside a step (a wait for a slot).
    pub(crate) fn opened_on(&mut self, endpoint: &Endpoint, conn: &Connection) {
        self.counters.streams_opened += 1;
        if let Some(p) = self
            .endpoints
            .get_mut(endpoint)
            .and_then(|es| es.conns.iter_mut().find(|p| p.conn.same_connection(conn)))
        {
            if p.streams > 0 {
                self.counters.reuses += 1;
            }
            p.streams += 1;
            p.idle_since = None;
        }
    }
}
