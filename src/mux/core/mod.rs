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
//!
//! The concerns live apart, as in h2's streams: stream ids, counts and
//! stream credit (`streams`), flow-control windows (`flow`), receiving
//! (`recv`), the application's sending (`send`), the connection's send
//! buffer, room waiters and queued resets (`sending`), the turn order
//! (`schedule`) and the frames each turn sends (`transmit`), keepalive
//! (`keepalive`), the budgets of resets and control frames (`budgets`),
//! who to wake (`woken`), go-away and close (`shutdown`), and the counters
//! (`stats`). Each owns its state, with private fields, and the
//! `Multiplexer` (`state`) coordinates them.
//!
//! One stream's state (`stream`) is owned the same way, as quinn-proto's
//! per-stream `Send` and `Recv` (`streams/{send,recv}.rs`): its sending
//! half (`send_half`: phase, OPEN, queue, offsets and credit, turn, our
//! RESET, what the writer waits for) and its receiving half (`recv_half`:
//! window, buffer, the direction's state, credit listing, what the reader
//! waits for), each with private fields that the other files change
//! through its methods; and the application's part (who opened it, its
//! failure, its handles, its slot in the peer's limit), private to
//! `stream`, whose methods also combine the parts where a question takes
//! more than one (`wire_done`, `grant_credit`).

mod budgets;
mod buffer;
mod flow;
mod ids;
mod input;
mod keepalive;
mod recv;
mod recv_half;
mod schedule;
mod send;
mod send_half;
mod sending;
mod shutdown;
mod state;
mod stats;
mod stream;
mod streams;
mod transmit;
mod window;
mod woken;

pub(crate) use state::{Multiplexer, ReadOutcome};
pub(crate) use woken::Event;

#[cfg(test)]
mod tests;
