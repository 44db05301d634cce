//! What early data costs an acceptor (docs/SECURITY.md, "Early data"): its
//! first step of the handshake (its Setup made, the dialer's read and
//! agreed, the early data judged, keys derived, its Auth made) for a
//! Setup without early data, and for early data refused as seen before (a
//! replay, a canned Setup sent again), refused under load, refused after
//! its box was opened (meant for another acceptor), and accepted, signed
//! or with a ticket. The dialers' Setups are made outside the timing.
//!
//! cargo bench --features fuzzing --bench early

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use weft::fuzzing::{EarlyBench, EarlyDialer, EarlyVerdict};

fn early(c: &mut Criterion) {
    let bench = EarlyBench::new();
    let mut group = c.benchmark_group("early_data_acceptor_step");
    group
        .sample_size(100)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    let fresh =
        |name: &str, dialer: EarlyDialer, expect: EarlyVerdict, group: &mut criterion::BenchmarkGroup<_>| {
            group.bench_function(name, |b| {
                b.iter_batched(
                    || bench.setup(dialer),
                    |setup| assert_eq!(bench.accept(&setup, false), expect),
                    BatchSize::SmallInput,
                )
            });
        };
    fresh(
        "no_early_data",
        EarlyDialer::Plain,
        EarlyVerdict::Proving,
        &mut group,
    );
    let canned = bench.setup(EarlyDialer::Relayed);
    assert_eq!(bench.accept(&canned, false), EarlyVerdict::Proving);
    group.bench_function("refused_as_seen", |b| {
        b.iter(|| assert_eq!(bench.accept(&canned, false), EarlyVerdict::Proving))
    });
    group.bench_function("refused_under_load", |b| {
        b.iter_batched(
            || bench.setup(EarlyDialer::Signed),
            |setup| assert_eq!(bench.accept(&setup, true), EarlyVerdict::Proving),
            BatchSize::SmallInput,
        )
    });
    fresh(
        "refused_after_opening",
        EarlyDialer::Relayed,
        EarlyVerdict::Proving,
        &mut group,
    );
    fresh(
        "accepted_signed",
        EarlyDialer::Signed,
        EarlyVerdict::Accepted,
        &mut group,
    );
    fresh(
        "accepted_ticketed",
        EarlyDialer::Ticketed,
        EarlyVerdict::Accepted,
        &mut group,
    );
    group.finish();
}

criterion_group!(benches, early);
criterion_main!(benches);
