//! The policy decided without a socket, a clock or a runtime: the arbiter
//! alone here, and in [`shell`] with the wire that obeys it and two real
//! cores, over fake transports that count writes and flushes and push back
//! on demand.

mod shell;

use super::*;

fn lone() -> Waiting {
    Waiting {
        readers: 1,
        others: false,
        live: true,
    }
}

#[test]
fn a_lone_waiting_reader_is_lent_the_read_and_anyone_else_waiting_takes_it_back() {
    let mut arbiter = Arbiter::default();
    assert_eq!(arbiter.holder(), None);
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    assert_eq!(arbiter.holder(), Some(1));
    // Asking again (the same stream polled again) keeps it lent.
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    // A second reader: the driver reads for both.
    let two = Waiting { readers: 2, ..lone() };
    assert_eq!(arbiter.wait_read(3, two), Lending::TakenBack);
    assert_eq!(arbiter.holder(), None);
    assert_eq!(arbiter.wait_read(3, two), Lending::Driver);
    // A writer, an opener or an acceptor waiting: the driver reads.
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    let writer_too = Waiting {
        others: true,
        ..lone()
    };
    assert_eq!(arbiter.wait_read(1, writer_too), Lending::TakenBack);
    // No driver, or a failed connection: nothing to lend.
    let dead = Waiting {
        live: false,
        ..lone()
    };
    assert_eq!(arbiter.wait_read(1, dead), Lending::Driver);
    assert_eq!(arbiter.holder(), None);
}

#[test]
fn the_read_goes_back_when_its_stream_has_its_data_and_only_then() {
    let mut arbiter = Arbiter::default();
    assert_eq!(arbiter.wait_read(5, lone()), Lending::Lent);
    // Another stream's data changes nothing.
    assert_eq!(arbiter.stop_waiting(7), Lending::Driver);
    assert_eq!(arbiter.holder(), Some(5));
    assert_eq!(arbiter.stop_waiting(5), Lending::TakenBack);
    assert_eq!(arbiter.holder(), None);
    // A timer of the driver's takes it back as well.
    assert_eq!(arbiter.wait_read(5, lone()), Lending::Lent);
    assert_eq!(arbiter.take_back(), Lending::TakenBack);
    assert_eq!(arbiter.take_back(), Lending::Driver);
}

fn output(woken_readers: usize) -> Output {
    Output {
        queued: true,
        flush: true,
        woken_readers,
        pushed_back: false,
        failed: false,
    }
}

#[test]
fn a_writer_holds_its_flush_for_readers_woken_ahead_and_the_driver_yields_once_for_them() {
    let mut arbiter = Arbiter::default();
    // Nobody woken ahead: write and flush.
    let plan = arbiter.task_write(output(0));
    assert!(plan.write && plan.flush);
    // Two readers woken ahead: write, hold the flush.
    let plan = arbiter.task_write(output(2));
    assert!(plan.write && !plan.flush);
    arbiter.wrote(100);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.task_done(plan);
    // The driver's turn yields once for them, then flushes.
    assert!(!arbiter.driver_may_flush());
    assert!(arbiter.driver_may_flush());
    // A flush that was never held does not make the driver wait.
    arbiter.flushed();
    assert!(arbiter.driver_may_flush());
}

#[test]
fn a_task_flushes_what_it_left_unflushed_at_once_and_an_unflushed_write_holds_nobody_up() {
    let mut arbiter = Arbiter::default();
    // A write that asked for no flush (a stream's data, its end to come)
    // holds no flush: the driver's turn may flush it.
    let plan = arbiter.task_write(Output {
        flush: false,
        ..output(0)
    });
    assert!(plan.write && !plan.flush);
    arbiter.wrote(100);
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush());
    // The task's flush, with nothing more queued, goes from the task.
    let plan = arbiter.task_write(Output {
        queued: false,
        ..output(0)
    });
    assert!(plan.write && plan.flush);
    assert_eq!(plan.batches, 0);
}

#[test]
fn only_writers_that_held_bytes_count_towards_the_sixteen() {
    let mut arbiter = Arbiter::default();
    arbiter.spent(DIRECT_WRITE_BUDGET);
    // Sixteen tasks past their share: the driver writes for them, and
    // none of them held anything.
    for _ in 0..FLUSH_HOLD_WRITERS {
        let plan = arbiter.task_write(output(5));
        assert!(!plan.write);
        arbiter.task_done(plan);
    }
    assert!(arbiter.driver_may_flush(), "nothing held: no yield");
    arbiter.driver_turn();
    let plan = arbiter.task_write(output(5));
    assert!(plan.write && !plan.flush, "the next writer may still hold");
}

#[test]
fn a_held_flush_that_another_writer_flushed_makes_the_driver_wait_for_nothing() {
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(2));
    arbiter.wrote(100);
    arbiter.task_done(plan);
    // The last reader's task writes and flushes for all.
    let plan = arbiter.task_write(output(0));
    assert!(plan.flush);
    arbiter.wrote(100);
    arbiter.flushed();
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush(), "nothing is held any more");
}

#[test]
fn at_most_sixteen_writers_hold_a_flush_in_a_row() {
    let mut arbiter = Arbiter::default();
    for writer in 0..FLUSH_HOLD_WRITERS {
        let plan = arbiter.task_write(output(100));
        assert!(plan.write && !plan.flush, "writer {writer} holds");
        arbiter.wrote(10);
        arbiter.task_done(plan);
    }
    let plan = arbiter.task_write(output(100));
    assert!(plan.write && plan.flush, "the seventeenth flushes for all");
    arbiter.flushed();
    // And the count starts again.
    assert!(!arbiter.task_write(output(100)).flush);
}

#[test]
fn a_held_flush_never_holds_back_a_records_worth() {
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(3));
    arbiter.wrote(FLUSH_HOLD_LIMIT - 1);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.wrote(1);
    assert!(arbiter.flush_past_hold(plan));
    // Nor does the driver wait on so much.
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush());
}

#[test]
fn no_task_writes_past_its_share_until_the_drivers_turn_so_no_writer_starves() {
    let mut arbiter = Arbiter::default();
    assert!(arbiter.may_write_through(false, 2));
    arbiter.spent(DIRECT_WRITE_BUDGET - 1);
    assert!(arbiter.task_write(output(0)).write);
    arbiter.spent(1);
    // Spent: output queues for the driver, which serves streams in turn.
    assert!(!arbiter.task_write(output(0)).write);
    assert!(!arbiter.may_write_through(false, 2));
    // Alone on the connection, a stream shares with nobody.
    assert!(arbiter.may_write_through(false, 1));
    // Nothing jumps what the transport pushed back, alone or not.
    assert!(!arbiter.may_write_through(true, 1));
    assert!(
        !Arbiter::default()
            .task_write(Output {
                pushed_back: true,
                ..output(0)
            })
            .write
    );
    arbiter.driver_turn();
    assert!(arbiter.may_write_through(false, 2));
    assert!(arbiter.task_write(output(0)).write);
}

#[test]
fn the_shares_are_a_records_worth_held_and_64_kib_written_between_turns() {
    // A reply of 10,000 bytes is still held for the readers ahead.
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(1));
    arbiter.wrote(10_000);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.wrote(16 * 1024 - 10_000);
    assert!(arbiter.flush_past_hold(plan));
    // A task writes 60,000 bytes itself and more, up to 64 KiB.
    let mut arbiter = Arbiter::default();
    arbiter.spent(60_000);
    assert!(arbiter.may_write_through(false, 2));
    arbiter.spent(64 * 1024 - 60_000);
    assert!(!arbiter.may_write_through(false, 2));
}

#[test]
fn keepalive_waits_for_the_woken_readers_only_when_it_is_all_that_waits() {
    let mut arbiter = Arbiter::default();
    assert!(!arbiter.defer_keepalive(0, || true));
    assert!(!arbiter.defer_keepalive(2, || false));
    assert!(arbiter.defer_keepalive(2, || true));
    // Deferred once: the driver's next turn flushes.
    assert!(arbiter.driver_may_flush());
    // Bytes waiting for a flush already go now.
    arbiter.wrote(10);
    assert!(!arbiter.defer_keepalive(2, || true));
}
