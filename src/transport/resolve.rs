//! Where a dialer connects: an address, or a name its resolver turns into
//! addresses.

use std::{
    fmt,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
};

use tower::{Service, ServiceExt};

use crate::error::BoxError;

/// What a dialer connects to: a socket address, or a host name and port
/// that its [`Resolve`]r turns into addresses ([`TcpConnector`] tries them
/// in turn).
///
/// ```
/// use weft::transport::Target;
///
/// let addr: Target = "127.0.0.1:7000".parse::<std::net::SocketAddr>().unwrap().into();
/// assert_eq!(addr.to_string(), "127.0.0.1:7000");
/// assert_eq!(Target::host("example.test", 7000).to_string(), "example.test:7000");
/// ```
///
/// [`TcpConnector`]: crate::transport::TcpConnector
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Target {
    /// A socket address, dialed as it is.
    Addr(SocketAddr),
    /// A host name and port, resolved on every dial.
    Host(Name),
    /// A Unix domain socket's path, dialed by
    /// [`Connector`](crate::transport::Connector).
    #[cfg(unix)]
    Unix(std::path::PathBuf),
}

impl Target {
    /// A host name and port (an IP address given as a name is used as
    /// one, without a lookup; `[v6]` brackets are allowed).
    pub fn host(host: impl Into<String>, port: u16) -> Self {
        let host = host.into();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse() {
            Ok(ip) => Self::Addr(SocketAddr::new(ip, port)),
            Err(_) => Self::Host(Name { host, port }),
        }
    }
}

impl From<SocketAddr> for Target {
    fn from(addr: SocketAddr) -> Self {
        Self::Addr(addr)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(addr) => write!(f, "{addr}"),
            Target::Host(name) => write!(f, "{name}"),
            #[cfg(unix)]
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A host name and the port asked for, what a [`Resolve`]r resolves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    host: String,
    port: u16,
}

impl Name {
    /// The host name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port asked for (a resolver may answer other ports, from SRV
    /// records say).
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Turns a [`Name`] into the addresses to try, in order: any tower
/// service from `Name` to an iterator of `SocketAddr`s (as hyper-util's
/// `Resolve`), such as [`GaiResolver`] (the default) or a `service_fn`.
///
/// ```
/// use std::net::SocketAddr;
/// use weft::transport::{Name, TcpConnector};
///
/// // Every name to one address, as a test's fixed table would.
/// let fixed = tower::service_fn(|_: Name| async {
///     Ok::<_, std::io::Error>(vec!["127.0.0.1:7000".parse::<SocketAddr>().unwrap()])
/// });
/// let connector = TcpConnector::new().resolver(fixed);
/// # let _ = connector;
/// ```
pub trait Resolve: Clone + Send + Sync + 'static {
    /// Resolves `name`: at least one address, or an error saying why not.
    fn resolve(&self, name: Name) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;
}

impl<S, A> Resolve for S
where
    S: Service<Name, Response = A, Error: Into<BoxError>, Future: Send> + Clone + Send + Sync + 'static,
    A: IntoIterator<Item = SocketAddr>,
{
    fn resolve(&self, name: Name) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>> {
        let service = self.clone();
        Box::pin(async move {
            let shown = name.to_string();
            let addrs: Vec<SocketAddr> = service
                .oneshot(name)
                .await
                .map_err(|err| {
                    let err: BoxError = err.into();
                    io::Error::other(format!(
                        "resolving {shown}: {}",
                        crate::error::text_with_causes(&*err)
                    ))
                })?
                .into_iter()
                .collect();
            if addrs.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{shown} resolved to no address"),
                ));
            }
            Ok(addrs)
        })
    }
}

/// The system's resolver (`getaddrinfo`, through tokio's `lookup_host`,
/// off the runtime's threads), as hyper-util's `GaiResolver`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GaiResolver {
    _priv: (),
}

impl GaiResolver {
    /// The system's resolver.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Service<Name> for GaiResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        Box::pin(async move {
            let addrs: Vec<_> = tokio::net::lookup_host((name.host(), name.port()))
                .await?
                .collect();
            Ok(addrs.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_is_an_address_is_not_looked_up() {
        assert_eq!(
            Target::host("[::1]", 80),
            Target::Addr("[::1]:80".parse().unwrap())
        );
        assert_eq!(
            Target::host("10.0.0.1", 80),
            Target::Addr("10.0.0.1:80".parse().unwrap())
        );
        assert!(matches!(Target::host("localhost", 80), Target::Host(_)));
    }

    #[tokio::test]
    async fn a_resolver_says_which_name_failed_and_an_empty_answer_is_an_error() {
        let failing = tower::service_fn(|_: Name| async {
            Err::<Vec<SocketAddr>, _>(io::Error::other("no such zone"))
        });
        let Target::Host(name) = Target::host("db.test", 5432) else {
            unreachable!()
        };
        let err = failing.resolve(name.clone()).await.unwrap_err();
        assert_eq!(err.to_string(), "resolving db.test:5432: no such zone");
        let empty = tower::service_fn(|_: Name| async { Ok::<_, io::Error>(Vec::<SocketAddr>::new()) });
        let err = empty.resolve(name).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(err.to_string(), "db.test:5432 resolved to no address");
    }
}
