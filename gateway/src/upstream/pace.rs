//! How long a worker may take to begin its answer. A worker sends a whole (non-streamed) answer's headers
//! with its end, so for a whole answer that wait is queue, prompt and generation together, and what the
//! generation takes follows what was asked: `max_tokens` at the model's speed. A stream's headers come
//! before its first token, so its wait is the base alone.
//!
//! The speed is the slower of a floor the operator sets (`RUNAII_WORKER_MIN_TOKENS_PER_SECOND`) and half
//! what this replica measured lately for one answer of the model: a model slower than the floor gets the
//! time it needs, and one answer at half its usual speed (a busy worker) still fits.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

/// The longest generation any whole answer is given, whatever it asks: a day.
const LONGEST: Duration = Duration::from_secs(86_400);

/// Weight of the newest answer in the running speed.
const NEWEST_WEIGHT: f64 = 0.2;

/// Measured tokens per second of one answer, by model: a running average on this replica.
#[derive(Debug, Default)]
pub struct Pace(Mutex<HashMap<String, f64>>);

impl Pace {
    /// Folds a finished answer's `timings` (the worker's `predicted_n` over `generation_ms`) into the
    /// model's speed. Answers of a handful of tokens say little about speed and are left out.
    pub fn observe(&self, model: &str, timings: &Value) {
        let tokens = timings["predicted_n"].as_f64().unwrap_or(0.0);
        let ms = timings["generation_ms"].as_f64().unwrap_or(0.0);
        if tokens < 8.0 || ms <= 0.0 {
            return;
        }
        let speed = tokens * 1000.0 / ms;
        let mut speeds = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = speeds.entry(model.to_owned()).or_insert(speed);
        *entry = (1.0 - NEWEST_WEIGHT) * *entry + NEWEST_WEIGHT * speed;
    }

    /// How long a whole answer of at most `max_tokens` may take to begin: `base` (queue and prompt) plus
    /// the generation at the slower of `floor` tokens per second and half the measured speed.
    #[must_use]
    pub fn whole_answer_within(&self, model: &str, base: Duration, max_tokens: u32, floor: u32) -> Duration {
        let measured = self.0.lock().unwrap_or_else(PoisonError::into_inner).get(model).copied();
        let floor = f64::from(floor.max(1));
        let speed = measured.map_or(floor, |m| floor.min(m / 2.0)).max(f64::MIN_POSITIVE);
        base + Duration::try_from_secs_f64(f64::from(max_tokens) / speed).unwrap_or(LONGEST).min(LONGEST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BASE: Duration = Duration::from_secs(10);

    #[test]
    fn before_any_answer_the_floor_sets_the_time() {
        let pace = Pace::default();
        assert_eq!(pace.whole_answer_within("m", BASE, 100, 5), BASE + Duration::from_secs(20));
    }

    #[test]
    fn a_model_slower_than_the_floor_gets_twice_its_measured_time() {
        let pace = Pace::default();
        // 2 tokens per second: 200 tokens would take 100 s, and get 200 s.
        pace.observe("slow", &json!({"predicted_n": 20, "generation_ms": 10_000.0}));
        assert_eq!(pace.whole_answer_within("slow", BASE, 200, 5), BASE + Duration::from_secs(200));
        // A fast model keeps the floor's time; another model is not affected.
        pace.observe("fast", &json!({"predicted_n": 100, "generation_ms": 1_000.0}));
        assert_eq!(pace.whole_answer_within("fast", BASE, 200, 5), BASE + Duration::from_secs(40));
        assert_eq!(pace.whole_answer_within("other", BASE, 200, 5), BASE + Duration::from_secs(40));
    }

    #[test]
    fn tiny_answers_do_not_move_the_speed() {
        let pace = Pace::default();
        pace.observe("m", &json!({"predicted_n": 1, "generation_ms": 60_000.0}));
        assert_eq!(pace.whole_answer_within("m", BASE, 100, 5), BASE + Duration::from_secs(20));
    }
}
