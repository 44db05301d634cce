//! What a pool's calls fail with: the endpoint, and the cause.

use std::{sync::Arc, time::Duration};

use super::Endpoint;
use crate::error::Error;

/// Why a pool could not give a stream or a connection. Every variant names
/// the endpoint; [`source`](std::error::Error::source) is the connection's
/// own [`Error`] where there is one, so a pinned key that did not match
/// reads, down the chain, as the key expected and the key seen.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The dial failed (every caller that waited on it gets this).
    #[error("dialing {endpoint} failed")]
    Dial {
        /// Where.
        endpoint: Endpoint,
        /// The dialer's error.
        #[source]
        source: Error,
    },
    /// A dial to the endpoint failed recently, and the next one waits
    /// until the backoff has passed (exponential, with jitter).
    #[error("not redialing {endpoint} for another {}, after {failures} failed dial(s)", crate::error::Rounded(*.retry_in))]
    Backoff {
        /// Where.
        endpoint: Endpoint,
        /// How long until the next dial may start.
        retry_in: Duration,
        /// Dials that failed in a row.
        failures: u32,
        /// Why the last one failed.
        #[source]
        source: Arc<PoolError>,
    },
    /// The connection agreed another application protocol than the
    /// endpoint requires.
    #[error("{endpoint} agreed application protocol {agreed:?}")]
    Protocol {
        /// Where (and what it requires).
        endpoint: Endpoint,
        /// What the connection agreed.
        agreed: Option<String>,
    },
    /// Opening a stream on a pooled connection failed.
    #[error("opening a stream to {endpoint} failed")]
    Open {
        /// Where.
        endpoint: Endpoint,
        /// The connection's error.
        #[source]
        source: Error,
    },
}

impl PoolError {
    /// The endpoint the call was for.
    pub fn endpoint(&self) -> &Endpoint {
        match self {
            PoolError::Dial { endpoint, .. }
            | PoolError::Backoff { endpoint, .. }
            | PoolError::Protocol { endpoint, .. }
            | PoolError::Open { endpoint, .. } => endpoint,
        }
    }

    /// Whether the caller's request provably never reached the peer: not
    /// when the dial that failed carried it as early data and the peer may
    /// have acted on it ([`Error::early_data_in_doubt`]).
    pub fn never_processed(&self) -> bool {
        !self.connection_error().is_some_and(Error::early_data_in_doubt)
    }

    /// The same error for callers whose requests did not ride the dial:
    /// their requests were never sent.
    pub(crate) fn settled(self) -> Self {
        match self {
            PoolError::Dial { endpoint, source } => PoolError::Dial {
                endpoint,
                source: source.settled(),
            },
            other => other,
        }
    }

    /// The connection's error underneath, if there is one.
    pub fn connection_error(&self) -> Option<&Error> {
        match self {
            PoolError::Dial { source, .. } | PoolError::Open { source, .. } => Some(source),
            PoolError::Backoff { source, .. } => source.connection_error(),
            PoolError::Protocol { .. } => None,
        }
    }
}

impl From<PoolError> for std::io::Error {
    fn from(err: PoolError) -> Self {
        let kind = match err.connection_error() {
            Some(inner) => std::io::Error::from(inner.clone()).kind(),
            None => std::io::ErrorKind::Unsupported,
        };
        std::io::Error::new(kind, err)
    }
}
