//! Percentiles, ping's mdev and the Vanadium seed's histogram.

use std::fmt::Write;

/// A sorted sample.
#[derive(Debug, Clone)]
pub struct Sample(Vec<f64>);

impl Sample {
    pub fn new(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Self(values)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn values(&self) -> &[f64] {
        &self.0
    }

    pub fn avg(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    /// The nearest-rank percentile: `p` = 0 is the minimum, 100 the maximum.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let rank = (p / 100.0 * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    pub fn min(&self) -> f64 {
        self.percentile(0.0)
    }

    pub fn max(&self) -> f64 {
        self.percentile(100.0)
    }

    /// Mean deviation as ping reports it: sqrt(mean(x²) − mean(x)²).
    pub fn mdev(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let n = self.0.len() as f64;
        let mean = self.avg();
        let square = self.0.iter().map(|x| x * x).sum::<f64>() / n;
        (square - mean * mean).max(0.0).sqrt()
    }

    /// AVG, P0, P10, P50, P90, P100, as the quinn seed's table.
    pub fn quinn_json(&self) -> serde_json::Value {
        serde_json::json!({
            "avg": round3(self.avg()),
            "p0": round3(self.min()),
            "p10": round3(self.percentile(10.0)),
            "p50": round3(self.percentile(50.0)),
            "p90": round3(self.percentile(90.0)),
            "p100": round3(self.max()),
        })
    }
}

/// Three decimals are plenty for every figure here.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// One bucket of a [`Histogram`]: `[low, high)`, `high` = `None` for the
/// open last one.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    pub low: f64,
    pub high: Option<f64>,
    pub count: usize,
}

/// The Vanadium seed's histogram: buckets that widen geometrically from the
/// minimum, with counts, percentages, the running percentage and a bar.
#[derive(Debug, Clone)]
pub struct Histogram {
    pub buckets: Vec<Bucket>,
    pub count: usize,
}

impl Histogram {
    /// 16 buckets from the minimum, each about 1.25 times as wide as the
    /// last, sized so the first 15 reach past the 99th percentile; the
    /// 17th is open.
    pub fn new(sample: &Sample) -> Self {
        const BUCKETS: usize = 16;
        const GROWTH: f64 = 1.25;
        let count = sample.len();
        if count == 0 {
            return Self {
                buckets: Vec::new(),
                count,
            };
        }
        let min = sample.min().floor();
        let reach = (sample.percentile(99.0) - min).max(1.0) * 1.5;
        let units: f64 = (0..BUCKETS - 1).map(|i| GROWTH.powi(i as i32)).sum();
        let first = (reach / units).max(1.0);
        let mut edges = vec![min];
        for i in 0..BUCKETS {
            let width = (first * GROWTH.powi(i as i32)).round().max(1.0);
            edges.push(edges[i] + width);
        }
        let mut buckets: Vec<Bucket> = (0..BUCKETS)
            .map(|i| Bucket {
                low: edges[i],
                high: Some(edges[i + 1]),
                count: 0,
            })
            .collect();
        buckets.push(Bucket {
            low: edges[BUCKETS],
            high: None,
            count: 0,
        });
        for &x in sample.values() {
            let i = buckets
                .iter()
                .position(|b| b.high.is_none_or(|high| x < high))
                .unwrap_or(BUCKETS);
            buckets[i].count += 1;
        }
        Self { buckets, count }
    }

    /// The text form, `unit` naming the values' unit.
    pub fn render(&self, sample: &Sample, unit: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "--- Histogram (unit: {unit})");
        let _ = writeln!(
            out,
            "Count: {} Min: {:.0} Max: {:.0} Avg: {:.2}",
            self.count,
            sample.min(),
            sample.max(),
            sample.avg()
        );
        let _ = writeln!(out, "{}", "-".repeat(60));
        let width = self.buckets.last().map_or(1, |b| format!("{:.0}", b.low).len());
        let mut running = 0;
        for b in &self.buckets {
            running += b.count;
            let share = percent(b.count, self.count);
            let high = b.high.map_or("inf".to_owned(), |h| format!("{h:.0}"));
            let bar = "#".repeat((share / 10.0).ceil() as usize);
            let _ = writeln!(
                out,
                "[{:>width$.0}, {:>width$}) {:>6} {:>5.1}% {:>5.1}% {}",
                b.low,
                high,
                b.count,
                share,
                percent(running, self.count),
                bar
            );
        }
        out
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
