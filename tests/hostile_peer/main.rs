//! Hostile peers, one case per test, each named after what the offender
//! gets: the outcome, that the heap comes back (support::ThreadHeap counts
//! it per thread), and, for the connection-level cases, that a
//! well-behaved connection served alongside keeps working throughout.
//!
//! - `handshake`: Setups and records before authentication: oversized,
//!   truncated, repeated, random; low-order keys.
//! - `connection`: frame-by-frame peers against a multiplexed connection:
//!   Rapid Reset, MadeYouReset, control-frame floods, one-byte and empty
//!   data frames, ids, limits and windows, a peer that never reads, damaged
//!   records.
//! - `admission`: slowloris peers and a flood of canned Setups against an
//!   acceptor with admission control, over loopback TCP.
//! - `servers`: hostile clients against the RPC and HTTP servers, and a
//!   hostile server against the pool.
//! - `caps`: a server at its connection cap makes room for newcomers.

#[path = "../support/mod.rs"]
mod support;

mod admission;
mod caps;
mod connection;
mod handshake;
mod servers;

use support::ThreadHeap;

/// Counts the heap each thread holds, and its largest allocation: a test
/// on a current-thread runtime sees what its connections retain.
#[global_allocator]
static GLOBAL: ThreadHeap = ThreadHeap;
