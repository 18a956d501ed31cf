//! Prometheus text exposition shared by the gateway's and the worker's `/metrics`: labelled counters and
//! histograms, kept in memory and written out on each scrape.
//!
//! Hand-written rather than a metrics crate because the set is small and one value must stay exact:
//! cost is a decimal sum, and a float counter would drift from the ledger it mirrors.

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::ops::AddAssign;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Latency buckets in seconds: 0.5 ms to 60 s, dense where a gateway's overhead and a token's time live.
pub const LATENCY_BUCKETS: [f64; 16] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Counters keyed by their label values, in the order of the family's label names.
#[derive(Debug)]
pub struct Counters<V> {
    labels: &'static [&'static str],
    values: Mutex<BTreeMap<Vec<String>, V>>,
}

impl<V: Copy + Default + AddAssign + Display> Counters<V> {
    #[must_use]
    pub const fn new(labels: &'static [&'static str]) -> Self {
        Self { labels, values: Mutex::new(BTreeMap::new()) }
    }

    pub fn add(&self, label_values: &[&str], amount: V) {
        let key = label_values.iter().map(|v| (*v).to_owned()).collect();
        *self.values.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default() += amount;
    }

    /// The value for these label values (zero when never added to).
    #[must_use]
    pub fn get(&self, label_values: &[&str]) -> V {
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        self.values.lock().unwrap_or_else(PoisonError::into_inner).get(&key).copied().unwrap_or_default()
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
    series: Mutex<BTreeMap<Vec<String>, Series>>,
}

impl Histograms {
    #[must_use]
    pub const fn new(labels: &'static [&'static str], bounds: &'static [f64]) -> Self {
        Self { labels, bounds, series: Mutex::new(BTreeMap::new()) }
    }

    pub fn observe(&self, label_values: &[&str], took: Duration) {
        let secs = took.as_secs_f64();
        let key = label_values.iter().map(|v| (*v).to_owned()).collect();
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let s = series.entry(key).or_insert_with(|| Series { buckets: vec![0; self.bounds.len()], ..Series::default() });
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
        let key: Vec<String> = label_values.iter().map(|v| (*v).to_owned()).collect();
        self.series.lock().unwrap_or_else(PoisonError::into_inner).get(&key).map_or(0, |s| s.count)
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
}
