//! How to test discovery of your own: a DNS server in the test's process
//! (hickory-server, serving a zone the test changes), a resolver that asks
//! it alone, and `weft::discover::Dns` following the zone as it changes.
//! tests/discover.rs and tests/failover.rs do the same with RPC servers
//! behind the name; the zone's code is tests/support/dns.rs, which this
//! example takes as it is: copy it into your tests.
//!
//! cargo run --example discover_zone
//!
//! Prints the endpoints the name resolves to before and after a change.
//! Only loopback addresses.

#[path = "../tests/support/dns.rs"]
mod dns;

use std::{error::Error, time::Duration};

use dns::{ip, Zone, NAME};
use weft::discover::Dns;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // The zone: NAME has two A records, with a TTL of one second.
    let mut zone = Zone::start(&[ip(2), ip(3)]).await;
    let mut endpoints = Dns::ips(NAME, 7000)
        .resolver(zone.resolver())
        .refresh_bounds(Duration::from_millis(100), Duration::from_secs(1))
        .spawn()?;
    let found = |endpoints: &weft::discover::Endpoints| {
        endpoints
            .current()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    tokio::time::timeout(Duration::from_secs(5), endpoints.changed()).await?;
    println!("before: {}", found(&endpoints));
    // A server replaced: the name follows within a refresh.
    zone.set(&[ip(3), ip(4)]).await;
    tokio::time::timeout(Duration::from_secs(5), endpoints.changed()).await?;
    println!("after: {}", found(&endpoints));
    Ok(())
}
