//! W3C Trace Context's `traceparent`, read and written.

use proptest::prelude::*;

use super::TraceContext;

const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn the_specifications_example_reads_and_writes_back() {
    let context = TraceContext::parse(EXAMPLE, Some("congo=t61rcWkgMzE")).unwrap();
    assert_eq!(context.trace_id()[..4], [0x4b, 0xf9, 0x2f, 0x35]);
    assert_eq!(
        context.span_id(),
        [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
    );
    assert!(context.is_sampled());
    assert_eq!(context.state(), Some("congo=t61rcWkgMzE"));
    assert_eq!(context.traceparent(), EXAMPLE);
}

#[test]
fn malformed_values_are_refused() {
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", // short
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // extra, version 00
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // separator
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", // not hex
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", // later version, no '-'
    ] {
        assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
    }
}

#[test]
fn a_later_version_is_read_for_its_first_fields() {
    let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes-next";
    let context = TraceContext::parse(later, None).unwrap();
    assert!(!context.is_sampled());
    assert_eq!(
        context.traceparent(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    );
}

#[test]
fn a_child_keeps_the_trace_and_takes_a_new_span() {
    let root = TraceContext::new_root();
    let child = root.child();
    assert_eq!(child.trace_id(), root.trace_id());
    assert_ne!(child.span_id(), root.span_id());
    assert_ne!(TraceContext::new_root().trace_id(), root.trace_id());
}

#[test]
fn an_oversized_tracestate_is_dropped_not_cut() {
    let long = "a=".to_owned() + &"b".repeat(600);
    assert_eq!(TraceContext::parse(EXAMPLE, Some(&long)).unwrap().state(), None);
}

proptest! {
    #[test]
    fn any_text_parses_without_panicking(text in ".{0,80}", state in proptest::option::of(".{0,40}")) {
        let _ = TraceContext::parse(&text, state.as_deref());
    }

    #[test]
    fn what_is_written_reads_back(trace in any::<[u8; 16]>(), span in any::<[u8; 8]>(), sampled: bool) {
        prop_assume!(trace != [0; 16] && span != [0; 8]);
        let written = format!(
            "00-{}-{}-0{}",
            super::hex(&trace),
            super::hex(&span),
            u8::from(sampled)
        );
        let context = TraceContext::parse(&written, None).unwrap();
        prop_assert_eq!((context.trace_id(), context.span_id(), context.is_sampled()), (trace, span, sampled));
        prop_assert_eq!(context.traceparent(), written);
    }
}
