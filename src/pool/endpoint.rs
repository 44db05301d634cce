//! Where a pool connects: an address or a host name, and what the peer
//! there must be.

use std::{fmt, net::SocketAddr, str::FromStr, sync::Arc};

use crate::{handshake::PeerId, transport::Target, ParseError};

/// What a pool keeps connections to: a [`Target`] (an address, or a host
/// name with a port), plus, optionally, the key the peer must present and the
/// application protocol the connection must agree.
///
/// Two endpoints are the same pool entry when all three are equal, so a
/// pinned and an unpinned endpoint for one address get separate
/// connections.
///
/// ```
/// use weft::pool::Endpoint;
///
/// let plain: Endpoint = "127.0.0.1:7000".parse().unwrap();
/// let named = Endpoint::host("localhost", 7000).protocol("h2");
/// assert_eq!(plain.to_string(), "127.0.0.1:7000");
/// assert_eq!(named.to_string(), "localhost:7000 (h2)");
/// ```
#[derive(Clone)]
pub struct Endpoint {
    // Cheap to clone: every pooled connection and error names its endpoint.
    inner: Arc<Inner>,
    /// The hash of `inner`, computed once: the pool looks an endpoint up
    /// on every stream it opens.
    hash: u64,
}

impl PartialEq for Endpoint {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && (Arc::ptr_eq(&self.inner, &other.inner) || self.inner == other.inner)
    }
}

impl Eq for Endpoint {}

/// Ordered by target, then pinned key, then protocol (a discovered set
/// lists its endpoints in address order).
impl Ord for Endpoint {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return std::cmp::Ordering::Equal;
        }
        let (a, b) = (&*self.inner, &*other.inner);
        a.target
            .cmp(&b.target)
            .then_with(|| a.peer.cmp(&b.peer))
            .then_with(|| a.protocol.cmp(&b.protocol))
    }
}

impl PartialOrd for Endpoint {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Endpoint {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Inner {
    fn hashed(self) -> Endpoint {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(&self);
        Endpoint {
            inner: Arc::new(self),
            hash,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Inner {
    target: Target,
    peer: Option<PeerId>,
    protocol: Option<String>,
}

impl Endpoint {
    /// An endpoint at a socket address.
    pub fn new(addr: SocketAddr) -> Self {
        Self::from_target(Target::Addr(addr))
    }

    /// An endpoint at a host name and port, which the dialer's resolver
    /// looks up on every dial (an IP address given as a name is used as
    /// one, without a lookup).
    pub fn host(host: impl Into<String>, port: u16) -> Self {
        Self::from_target(Target::host(host, port))
    }

    /// An endpoint at a Unix domain socket's `path`, which the standard
    /// dialer ([`transport::Connector`](crate::transport::Connector))
    /// dials; pin the server's key as for any endpoint.
    #[cfg(unix)]
    pub fn unix(path: impl Into<std::path::PathBuf>) -> Self {
        Self::from_target(Target::Unix(path.into()))
    }

    /// An endpoint at `target`.
    pub fn from_target(target: Target) -> Self {
        Inner {
            target,
            peer: None,
            protocol: None,
        }
        .hashed()
    }

    /// The peer must present this key ([`Handshake::expect_peer`]); the
    /// dialer stack needs an [`EncryptLayer`](crate::EncryptLayer) to
    /// check it.
    ///
    /// [`Handshake::expect_peer`]: crate::handshake::Handshake::expect_peer
    pub fn expect_peer(self, peer: PeerId) -> Self {
        let mut inner = (*self.inner).clone();
        inner.peer = Some(peer);
        inner.hashed()
    }

    /// The connection must agree this application protocol in its Setup
    /// (the dialer's [`NegotiateLayer`](crate::NegotiateLayer) offers
    /// the protocols; a connection that agrees another fails the dial).
    pub fn protocol(self, protocol: impl Into<String>) -> Self {
        let mut inner = (*self.inner).clone();
        inner.protocol = Some(protocol.into());
        inner.hashed()
    }

    /// Where it is.
    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// The key the peer must present, if pinned.
    pub fn expected_peer(&self) -> Option<&PeerId> {
        self.inner.peer.as_ref()
    }

    /// The application protocol the connection must agree, if any.
    pub fn expected_protocol(&self) -> Option<&str> {
        self.inner.protocol.as_deref()
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Self::new(addr)
    }
}

/// Parses `host:port` (`[v6]:port` for IPv6 addresses).
impl FromStr for Endpoint {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Self::new(addr));
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| ParseError::new("an endpoint (host:port)", s))?;
        let port = port
            .parse()
            .map_err(|_| ParseError::new("an endpoint (host:port)", s))?;
        if host.is_empty() {
            return Err(ParseError::new("an endpoint (host:port)", s));
        }
        Ok(Self::host(host, port))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner.target)?;
        if let Some(protocol) = &self.inner.protocol {
            write!(f, " ({protocol})")?;
        }
        if let Some(peer) = &self.inner.peer {
            write!(f, " (expecting peer {peer})")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({self})")
    }
}
