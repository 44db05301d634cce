//! Without the feature `metrics`: the same hooks, doing nothing, so that
//! the code that calls them needs no `cfg`.

use std::{sync::Arc, time::Instant};

use crate::{error::Error, handshake::Role, pool::Endpoint, rpc::Code};

#[path = "totals.rs"]
mod totals;

pub(crate) use totals::Totals;

#[derive(Debug)]
pub(crate) struct RpcMetrics;

impl RpcMetrics {
    pub(crate) fn client() -> Arc<Self> {
        Arc::new(Self)
    }

    pub(crate) fn server(_: impl IntoIterator<Item = &'static str>) -> Arc<Self> {
        Arc::new(Self)
    }

    pub(crate) fn start(&self, _: &str) -> CallTimer {
        CallTimer
    }
}

pub(crate) struct CallTimer;

impl CallTimer {
    pub(crate) fn finish(self, _: Code) {}
}

#[derive(Debug)]
pub(crate) struct ConnectionMetrics;

impl ConnectionMetrics {
    pub(crate) fn open(_: Role) -> Self {
        Self
    }

    pub(crate) fn report(&mut self, _: Totals) {}

    pub(crate) fn close(self, _: Totals, _: Option<&Error>) {}
}

#[derive(Debug, Clone)]
pub(crate) struct HandshakeMetrics;

impl HandshakeMetrics {
    pub(crate) fn new(_: Role) -> Self {
        Self
    }

    pub(crate) fn finished<T>(&self, _: Instant, _: &Result<T, Error>) {}

    pub(crate) fn early_data(&self, _: crate::handshake::EarlyData) {}
}

#[derive(Debug, Default)]
pub(crate) struct PoolMetrics;

impl PoolMetrics {
    pub(crate) fn waiters(&self, _: usize) {}

    pub(crate) fn connections(&mut self, _: &Endpoint, _: usize) {}

    pub(crate) fn dialed(&self, _: &Endpoint, _: bool) {}
}
