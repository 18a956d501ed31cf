//! Picking the next token from logits: repetition penalties (`repetition.rs`), then greedy at
//! temperature 0, else top-k → temperature → top-p.
//!
//! Sampling is done here rather than in a llama.cpp sampler chain so that a constraint's mask is
//! applied exactly once per step, a failed mask is an error instead of a silently unconstrained step,
//! and each token is accepted by the grammar exactly once.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::repetition::{History, Penalties};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    pub seed: u64,
    pub penalties: Penalties,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_p: 1.0, top_k: 40, seed: 0, penalties: Penalties::default() }
    }
}

#[derive(Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
    scratch: Vec<(u32, f32)>,
    history: History,
}

impl Sampler {
    #[must_use]
    pub fn new(params: SamplingParams) -> Self {
        Self { params, rng: StdRng::seed_from_u64(params.seed), scratch: Vec::new(), history: History::default() }
    }

    /// Records a token of the answer (sampled or forced by the grammar) and its text, for the penalties.
    pub fn record(&mut self, token: u32, piece: &[u8]) {
        if !self.params.penalties.is_off() {
            self.history.push(token, piece);
        }
    }

    /// Samples among the tokens `allowed` admits. `None` when it admits none.
    pub fn sample(&mut self, logits: &[f32], allowed: impl Fn(u32) -> bool) -> Option<u32> {
        self.scratch.clear();
        // Sorted by token id, as the logits are walked: one pass applies them.
        let adjustments = self.history.adjustments(&self.params.penalties);
        let mut next = adjustments.iter().peekable();
        self.scratch.extend(logits.iter().enumerate().filter_map(|(id, &logit)| {
            let id = u32::try_from(id).ok()?;
            let logit = match next.peek() {
                Some(&&(penalised, penalty)) if penalised == id => {
                    next.next();
                    logit - penalty
                }
                _ => logit,
            };
            (logit.is_finite() && allowed(id)).then_some((id, logit))
        }));
        if self.scratch.is_empty() {
            return None;
        }
        if self.params.temperature <= 0.0 {
            return self.scratch.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|&(id, _)| id);
        }
        let k = self.params.top_k.clamp(1, self.scratch.len());
        if k < self.scratch.len() {
            self.scratch.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            self.scratch.truncate(k);
        }
        self.scratch.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));

        let max = self.scratch[0].1;
        let temperature = self.params.temperature;
        let mut weights: Vec<f32> = self.scratch.iter().map(|&(_, l)| ((l - max) / temperature).exp()).collect();
        let total: f32 = weights.iter().sum();
        // top-p: keep the smallest prefix whose probability mass reaches p.
        let mut cumulative = 0.0;
        let mut keep = weights.len();
        for (i, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= self.params.top_p {
                keep = i + 1;
                break;
            }
        }
        weights.truncate(keep);
        let kept_total: f32 = weights.iter().sum();
        let mut target = self.rng.gen::<f32>() * kept_total;
        for (i, w) in weights.iter().enumerate() {
            if target < *w {
                return Some(self.scratch[i].0);
            }
            target -= w;
        }
        Some(self.scratch[keep - 1].0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_best_allowed_token() {
        let mut s = Sampler::new(SamplingParams { temperature: 0.0, ..SamplingParams::default() });
        let logits = [1.0, 5.0, 3.0];
        assert_eq!(s.sample(&logits, |_| true), Some(1));
        assert_eq!(s.sample(&logits, |id| id != 1), Some(2));
        assert_eq!(s.sample(&logits, |_| false), None);
    }

    #[test]
    fn same_seed_same_choice_and_mask_respected() {
        let logits: Vec<f32> = (0..100u8).map(|i| f32::from(i % 7)).collect();
        let params = SamplingParams { temperature: 1.0, top_p: 0.9, top_k: 50, seed: 42, ..SamplingParams::default() };
        let run = || {
            let mut s = Sampler::new(params);
            (0..20).map(|_| s.sample(&logits, |id| id % 2 == 0).unwrap_or(u32::MAX)).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a.iter().all(|id| id % 2 == 0));
    }

    #[test]
    fn penalties_move_the_choice_but_never_the_mask() {
        let penalties = Penalties { frequency: 0.0, presence: 3.0, dry: None };
        let mut s = Sampler::new(SamplingParams { temperature: 0.0, penalties, ..SamplingParams::default() });
        let logits = [1.0, 5.0, 3.0];
        assert_eq!(s.sample(&logits, |_| true), Some(1));
        s.record(1, b"x");
        assert_eq!(s.sample(&logits, |_| true), Some(2), "the used token lost 3");
        assert_eq!(s.sample(&logits, |id| id == 1), Some(1), "a penalised token the grammar alone allows is still chosen");
    }

    #[test]
    fn tiny_top_p_is_greedy() {
        let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_p: 0.0001, top_k: 40, seed: 7, ..SamplingParams::default() });
        let logits = [0.0, 9.0, 1.0, 2.0];
        for _ in 0..10 {
            assert_eq!(s.sample(&logits, |_| true), Some(1));
        }
    }
}
