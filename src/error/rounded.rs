//! Durations in messages, as a person reads them: three significant
//! figures in the largest unit that keeps them above one (`84.8 ms`, not
//! `84.787381ms`).

use std::{fmt, time::Duration};

/// `duration`, rounded for a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rounded(pub(crate) Duration);

impl fmt::Display for Rounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos() as f64;
        let (value, unit) = if nanos < 1e3 {
            (nanos, "ns")
        } else if nanos < 1e6 {
            (nanos / 1e3, "µs")
        } else if nanos < 1e9 {
            (nanos / 1e6, "ms")
        } else if nanos < 60e9 {
            (nanos / 1e9, "s")
        } else {
            (nanos / 60e9, "min")
        };
        // Three significant figures, trailing zeros dropped.
        let decimals = if value >= 100.0 {
            0
        } else if value >= 10.0 {
            1
        } else {
            2
        };
        let text = format!("{value:.decimals$}");
        let text = if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.')
        } else {
            &text
        };
        write!(f, "{text} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_three_figures_of_the_largest_unit_above_one() {
        let cases = [
            (Duration::from_nanos(84_787_381), "84.8 ms"),
            (Duration::from_millis(250), "250 ms"),
            (Duration::from_millis(1_500), "1.5 s"),
            (Duration::from_secs(10), "10 s"),
            (Duration::from_secs(600), "10 min"),
            (Duration::from_secs(90), "1.5 min"),
            (Duration::from_micros(999), "999 µs"),
            (Duration::from_nanos(1_234), "1.23 µs"),
            (Duration::from_nanos(7), "7 ns"),
            (Duration::ZERO, "0 ns"),
            (Duration::from_millis(100), "100 ms"),
            (Duration::from_secs(3_600 * 24), "1440 min"),
        ];
        for (duration, text) in cases {
            assert_eq!(Rounded(duration).to_string(), text, "{duration:?}");
        }
    }
}
