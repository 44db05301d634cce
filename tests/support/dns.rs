//! A DNS server in process for discovery tests: hickory-server on
//! 127.0.0.1 serving a zone whose A records for [`NAME`] a test sets, a
//! resolver that asks it alone, and listeners on 127.0.0.2 to .5 sharing
//! one port (A records carry no port). Only loopback addresses.

#![allow(dead_code)]

use std::{
    net::{Ipv4Addr, SocketAddr},
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use hickory_proto::rr::{
    rdata::{A, SOA},
    LowerName, Name, RData, Record, RecordType, RrKey,
};
use hickory_resolver::{
    config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts},
    net::runtime::TokioRuntimeProvider,
    TokioResolver,
};
use hickory_server::{
    store::in_memory::InMemoryZoneHandler,
    zone_handler::{AxfrPolicy, Catalog, ZoneType},
    Server as DnsServer,
};
use tokio::net::TcpListener;

/// The records' TTL, in seconds.
pub const TTL: u32 = 1;
pub const ZONE: &str = "weft.test.";
pub const NAME: &str = "echo.weft.test.";

/// Listeners on 127.0.0.2 to .5, all on one port (A records carry no
/// port): a port free on the first address, tried on the others.
pub async fn listeners() -> Vec<TcpListener> {
    'port: loop {
        let first = TcpListener::bind("127.0.0.2:0").await.unwrap();
        let port = first.local_addr().unwrap().port();
        let mut all = vec![first];
        for last in 3..=5 {
            match TcpListener::bind(SocketAddr::from(([127, 0, 0, last], port))).await {
                Ok(listener) => all.push(listener),
                Err(_) => continue 'port,
            }
        }
        return all;
    }
}

/// The test's DNS server: a zone whose A records for `NAME` it sets.
pub struct Zone {
    pub handler: Arc<InMemoryZoneHandler>,
    pub serial: u32,
    _server: DnsServer<Catalog>,
    addr: SocketAddr,
}

impl Zone {
    pub async fn start(ips: &[Ipv4Addr]) -> Zone {
        let origin = Name::from_str(ZONE).unwrap();
        let mut handler = InMemoryZoneHandler::empty(origin.clone(), ZoneType::Primary, AxfrPolicy::Deny);
        let soa = SOA::new(
            Name::from_str("ns.weft.test.").unwrap(),
            Name::from_str("admin.weft.test.").unwrap(),
            1,
            60,
            60,
            600,
            TTL,
        );
        assert!(handler.upsert_mut(Record::from_rdata(origin.clone(), TTL, RData::SOA(soa)), 1));
        let handler = Arc::new(handler);
        let mut catalog = Catalog::new();
        catalog.upsert(LowerName::new(&origin), vec![handler.clone()]);
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let mut server = DnsServer::new(catalog);
        server.register_socket(socket);
        let mut zone = Zone {
            handler,
            serial: 1,
            _server: server,
            addr,
        };
        zone.set(ips).await;
        zone
    }

    /// `NAME`'s A records are `ips` from now on.
    pub async fn set(&mut self, ips: &[Ipv4Addr]) {
        self.serial += 1;
        let name = Name::from_str(NAME).unwrap();
        self.handler
            .records_mut()
            .await
            .remove(&RrKey::new(LowerName::new(&name), RecordType::A));
        for ip in ips {
            let record = Record::from_rdata(name.clone(), TTL, RData::A(A(*ip)));
            assert!(self.handler.upsert(record, self.serial).await);
        }
    }

    /// Adds `records` to the zone, as one change.
    pub async fn add(&mut self, records: impl IntoIterator<Item = Record>) {
        self.serial += 1;
        for record in records {
            assert!(self.handler.upsert(record, self.serial).await);
        }
    }

    /// A resolver that asks this server only, over UDP.
    pub fn resolver(&self) -> TokioResolver {
        let mut udp = ConnectionConfig::udp();
        udp.port = self.addr.port();
        let server = NameServerConfig::new(self.addr.ip(), true, vec![udp]);
        let mut options = ResolverOpts::default();
        options.timeout = Duration::from_millis(500);
        TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(vec![server]),
            TokioRuntimeProvider::default(),
        )
        .with_options(options)
        .build()
        .unwrap()
    }
}

/// 127.0.0.`last`.
pub fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}
