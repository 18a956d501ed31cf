//! Prometheus text exposition shared by the gateway's and the worker's `/metrics`: labelled counters and
//! histograms, kept in memory and written out on each scrape.
//!
//! Hand-written rather than a metrics crate because the set is small and one value must stay exact:
//! cost is a decimal sum, and a float counter would drift from the ledger it mirrors.

use std::cmp::Ordering;
use std::fmt::{Display, Write as _};
use std::ops::AddAssign;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Latency buckets in seconds: 0.5 ms to 60 s, dense where a gateway's overhead and a token's time live.
pub const LATENCY_BUCKETS: [f64; 16] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// A family's series, sorted by their label values. Found with the caller's `&[&str]` as it is: a lookup
/// allocates nothing (a map keyed by `Vec<String>` cost every update one `String` per label and the
/// vector, some 40 allocations per request across the gateway's families). A new series is inserted once.
#[derive(Debug)]
struct Table<T>(Vec<(Vec<String>, T)>);

impl<T> Table<T> {
    const fn new() -> Self {
        Self(Vec::new())
    }

    fn position(&self, label_values: &[&str]) -> Result<usize, usize> {
        self.0.binary_search_by(|(values, _)| compare(values, label_values))
    }

    fn get(&self, label_values: &[&str]) -> Option<&T> {
        self.position(label_values).ok().map(|at| &self.0[at].1)
    }

    fn entry(&mut self, label_values: &[&str], make: impl FnOnce() -> T) -> &mut T {
        let at = match self.position(label_values) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (label_values.iter().map(|v| (*v).to_owned()).collect(), make()));
                at
            }
        };
        &mut self.0[at].1
    }

    fn iter(&self) -> impl Iterator<Item = &(Vec<String>, T)> {
        self.0.iter()
    }
}

/// The order of `Vec<String>` keys, against borrowed label values.
fn compare(values: &[String], label_values: &[&str]) -> Ordering {
    values.iter().map(String::as_str).cmp(label_values.iter().copied())
}

/// Counters keyed by their label values, in the order of the family's label names.
#[derive(Debug)]
pub struct Counters<V> {
    labels: &'static [&'static str],
    values: Mutex<Table<V>>,
}

impl<V: Copy + Default + AddAssign + Display> Counters<V> {
    #[must_use]
    pub const fn new(labels: &'static [&'static str]) -> Self {
        Self { labels, values: Mutex::new(Table::new()) }
    }

    pub fn add(&self, label_values: &[&str], amount: V) {
        *self.values.lock().unwrap_or_else(PoisonError::into_inner).entry(label_values, V::default) += amount;
    }

    /// The value for these label values (zero when never added to).
    #[must_use]
    pub fn get(&self, label_values: &[&str]) -> V {
        self.values.lock().unwrap_or_else(PoisonError::into_inner).get(label_values).copied().unwrap_or_default()
    }

    pub fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (values, value) in self.values.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = writeln!(out, "{name}{} {value}", labels(self.labels, values, None));
        }
    }
}

/// One histogram's state: cumulative bucket counts, count and sum (in microseconds, so it stays exact).
#[derive(Debug, Clone, Default)]
struct Series {
    buckets: Vec<u64>,
    count: u64,
    sum_micros: u64,
}

/// Histograms of durations keyed by their label values.
#[derive(Debug)]
pub struct Histograms {
    labels: &'static [&'static str],
    bounds: &'static [f64],
    series: Mutex<Table<Series>>,
}

impl Histograms {
    #[must_use]
    pub const fn new(labels: &'static [&'static str], bounds: &'static [f64]) -> Self {
        Self { labels, bounds, series: Mutex::new(Table::new()) }
    }

    pub fn observe(&self, label_values: &[&str], took: Duration) {
        let secs = took.as_secs_f64();
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let s = series.entry(label_values, || Series { buckets: vec![0; self.bounds.len()], ..Series::default() });
        for (bound, bucket) in self.bounds.iter().zip(s.buckets.iter_mut()) {
            if secs <= *bound {
                *bucket += 1;
            }
        }
        s.count += 1;
        s.sum_micros = s.sum_micros.saturating_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// How many observations these label values have.
    #[must_use]
    pub fn count(&self, label_values: &[&str]) -> u64 {
        self.series.lock().unwrap_or_else(PoisonError::into_inner).get(label_values).map_or(0, |s| s.count)
    }

    pub fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (values, s) in self.series.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            for (bound, n) in self.bounds.iter().zip(&s.buckets) {
                let _ = writeln!(out, "{name}_bucket{} {n}", labels(self.labels, values, Some(&bound.to_string())));
            }
            let _ = writeln!(out, "{name}_bucket{} {}", labels(self.labels, values, Some("+Inf")), s.count);
            let plain = labels(self.labels, values, None);
            let _ = writeln!(out, "{name}_sum{plain} {}.{:06}", s.sum_micros / 1_000_000, s.sum_micros % 1_000_000);
            let _ = writeln!(out, "{name}_count{plain} {}", s.count);
        }
    }
}

/// Writes a gauge family: one line per (label values, value).
pub fn write_gauge(out: &mut String, name: &str, help: &str, label_names: &[&str], rows: &[(Vec<String>, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (values, value) in rows {
        let _ = writeln!(out, "{name}{} {value}", labels(label_names, values, None));
    }
}

/// `{a="x",b="y"}` (or nothing without labels), with `le` last for histogram buckets.
fn labels(names: &[&str], values: &[String], le: Option<&str>) -> String {
    let mut pairs: Vec<String> = names.iter().zip(values).map(|(n, v)| format!("{n}=\"{}\"", escape(v))).collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

/// Label values may hold anything a client sent (a model id): escape what the text format requires.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_in_the_text_format() {
        let c: Counters<u64> = Counters::new(&["model", "status"]);
        c.add(&["m\"1", "ok"], 2);
        c.add(&["m\"1", "ok"], 3);
        let mut out = String::new();
        c.write(&mut out, "x_total", "things");
        assert!(out.contains("x_total{model=\"m\\\"1\",status=\"ok\"} 5"), "{out}");

        let h = Histograms::new(&["model"], &[0.001, 0.01]);
        h.observe(&["m"], Duration::from_micros(500));
        h.observe(&["m"], Duration::from_millis(5));
        h.observe(&["m"], Duration::from_secs(1));
        let mut out = String::new();
        h.write(&mut out, "lat_seconds", "latency");
        assert!(out.contains("lat_seconds_bucket{model=\"m\",le=\"0.001\"} 1"), "{out}");
        assert!(out.contains("lat_seconds_bucket{model=\"m\",le=\"0.01\"} 2"), "{out}");
        assert!(out.contains("lat_seconds_bucket{model=\"m\",le=\"+Inf\"} 3"), "{out}");
        assert!(out.contains("lat_seconds_sum{model=\"m\"} 1.005500"), "{out}");
        assert_eq!(h.count(&["m"]), 3);
    }

    #[test]
    fn series_are_found_and_rendered_in_label_order() {
        let c: Counters<u64> = Counters::new(&["a", "b"]);
        for (a, b) in [("m", "z"), ("a", "y"), ("m", "b"), ("ab", "x"), ("a", "y")] {
            c.add(&[a, b], 1);
        }
        assert_eq!(c.get(&["a", "y"]), 2);
        assert_eq!(c.get(&["m", "b"]), 1);
        assert_eq!(c.get(&["m", "c"]), 0, "an absent series reads zero");
        let mut out = String::new();
        c.write(&mut out, "n_total", "n");
        let lines: Vec<&str> = out.lines().skip(2).collect();
        assert_eq!(
            lines,
            ["n_total{a=\"a\",b=\"y\"} 2", "n_total{a=\"ab\",b=\"x\"} 1", "n_total{a=\"m\",b=\"b\"} 1", "n_total{a=\"m\",b=\"z\"} 1"]
        );
    }
}
