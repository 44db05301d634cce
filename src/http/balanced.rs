//! A hyper connector over every endpoint a name resolves to: each new
//! HTTP connection goes to the endpoint with fewer open, of two picked at
//! random.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use http::Uri;
use tower::{
    balance::p2c::Balance,
    buffer::Buffer,
    load::{pending_requests::Handle, PendingRequestsDiscover, TrackCompletion},
    Service,
};

use super::{connector::ConnectError, HttpStream};
use crate::{
    discover::Endpoints,
    error::BoxError,
    pool::{Dialer, Endpoint, Pool},
};

type Connecting = Pin<Box<dyn Future<Output = Result<HttpStream, BoxError>> + Send>>;

/// HTTP connections (weft streams) must stay open below this many waiting
/// for the balancer's task; past it, `poll_ready` pushes back.
const BUFFER: usize = 1024;

/// hyper-util's client (or tonic's `Channel`) over every endpoint a name
/// resolves to ([`Endpoints`]): each new HTTP connection is a stream on
/// the [`Pool`]'s connection to the endpoint with fewer HTTP connections
/// open, of two picked at random (tower's `p2c::Balance`, with
/// `PendingRequests` load counted until the connection closes). Every
/// URI goes to the name, whatever its authority.
///
/// hyper's client keeps connections: over HTTP/1.1 (what each stream
/// speaks, as with [`Connector`](super::Connector)) each request in flight
/// holds one, so requests spread as connections do; over h2 (endpoints
/// that require `h2`, or a client that speaks it by prior knowledge) one
/// connection carries them all, so they spread only as hyper opens more.
///
/// ```no_run
/// use hyper_util::{client::legacy::Client, rt::TokioExecutor};
/// use weft::{discover::Dns, http::BalancedConnector, pool::Pool};
///
/// # async fn example(dialer: impl weft::pool::Dialer, key: weft::handshake::PeerId) -> std::io::Result<()> {
/// let endpoints = Dns::ips("web.default.svc.cluster.local", 7000).expect_peer(key).spawn()?;
/// let connector = BalancedConnector::new(Pool::builder().build(dialer), endpoints);
/// let client = Client::builder(TokioExecutor::new()).build::<_, http_body_util::Empty<bytes::Bytes>>(connector);
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct BalancedConnector {
    endpoints: Endpoints,
    inner: Buffer<Uri, Connecting>,
}

impl BalancedConnector {
    /// Balances over `endpoints`, on `pool`. The balancer runs in a task
    /// of its own on the current tokio runtime.
    pub fn new<S: Dialer>(pool: Pool<S>, endpoints: Endpoints) -> Self {
        let services = endpoints.services(move |endpoint: &Endpoint| EndpointConnector {
            pool: pool.clone(),
            endpoint: endpoint.clone(),
        });
        let balance = Balance::new(PendingRequestsDiscover::new(services, UntilClosed));
        let boxed = tower::util::BoxService::new(tower::ServiceExt::map_future(balance, |f| -> Connecting {
            Box::pin(f)
        }));
        Self {
            endpoints,
            inner: Buffer::new(boxed, BUFFER),
        }
    }

    /// The endpoints it balances over.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }
}

impl fmt::Debug for BalancedConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BalancedConnector")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl Service<Uri> for BalancedConnector {
    type Response = HttpStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.inner.call(uri))
    }
}

/// The connections to one endpoint.
struct EndpointConnector<S> {
    pool: Pool<S>,
    endpoint: Endpoint,
}

impl<S: Dialer> Service<Uri> for EndpointConnector<S> {
    type Response = HttpStream;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.pool.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let opening = self.pool.call(self.endpoint.clone());
        Box::pin(async move {
            let stream = opening.await.map_err(ConnectError::Pool)?;
            Ok(HttpStream::new(stream, false))
        })
    }
}

/// A connection counts toward its endpoint's load until it closes.
#[derive(Debug, Clone, Copy, Default)]
struct UntilClosed;

impl TrackCompletion<Handle, HttpStream> for UntilClosed {
    type Output = HttpStream;

    fn track_completion(&self, handle: Handle, mut stream: HttpStream) -> HttpStream {
        stream.held = Some(handle);
        stream
    }
}
