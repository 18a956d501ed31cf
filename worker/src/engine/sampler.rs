//! Picking the next token from logits: repetition penalties (`repetition.rs`) and, for a JSON answer
//! near its budget or running away inside a string, the closing bonus (`closing.rs`), then greedy at temperature 0, else top-k →
//! temperature → top-p.
//!
//! Sampling is done here rather than in a llama.cpp sampler chain so that a constraint's mask is
//! applied exactly once per step, a failed mask is an error instead of a silently unconstrained step,
//! and each token is accepted by the grammar exactly once.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::closing::{Bonus, JsonDepth, JsonTokens};
use super::repetition::{History, Penalties};
use super::tail::tail_to_quote;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: usize,
    pub seed: u64,
    pub penalties: Penalties,
    /// The answer is JSON: close it before `max_tokens` cuts it (`closing.rs`).
    pub close_json: bool,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_p: 1.0, top_k: 40, seed: 0, penalties: Penalties::default(), close_json: false }
    }
}

/// How many of the best allowed tokens the grammar is asked about when a string must close and the
/// quote is not allowed yet.
const LOOKAHEAD: usize = 16;

/// The grammar trials one answer may spend walking tails to a string's end (`tail.rs`): a walk of a
/// dozen bytes over the alphabet takes about 2,500, one that crosses a stretch of letters twice that.
const TAIL_TRIALS: usize = 10_000;

/// What closing a JSON answer in time needs: where the answer is, its budget, and which tokens close.
#[derive(Debug)]
struct Closing {
    depth: JsonDepth,
    budget: usize,
    tokens: Arc<JsonTokens>,
    /// The rest of a tail found to let the open string close: tried again (one trial) at each step
    /// until the string closes or the tail no longer reaches the quote.
    tail: Vec<u32>,
    /// Grammar trials left for finding tails.
    trials: usize,
}

#[derive(Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
    scratch: Vec<(u32, f32)>,
    history: History,
    /// Tokens of the answer so far.
    produced: usize,
    closing: Option<Closing>,
}

impl Sampler {
    #[must_use]
    pub fn new(params: SamplingParams) -> Self {
        Self {
            params,
            rng: StdRng::seed_from_u64(params.seed),
            scratch: Vec::new(),
            history: History::default(),
            produced: 0,
            closing: None,
        }
    }

    /// With `close_json`, closes the answer before its `budget` of tokens runs out, and strings that run
    /// away; `tokens` says which tokens close.
    #[must_use]
    pub fn closing_json(mut self, budget: u32, tokens: Arc<JsonTokens>) -> Self {
        if self.params.close_json {
            self.closing =
                Some(Closing { depth: JsonDepth::default(), budget: budget as usize, tokens, tail: Vec::new(), trials: TAIL_TRIALS });
        }
        self
    }

    /// Records a token of the answer (sampled or forced by the grammar) and its text, for the penalties
    /// and the closing bonus.
    pub fn record(&mut self, token: u32, piece: &[u8]) {
        self.produced += 1;
        if !self.params.penalties.is_off() {
            self.history.push(token, piece);
        }
        if let Some(closing) = &mut self.closing {
            closing.depth.push(piece);
            // A token off the tail leaves it to be tried again from where the answer is now (another
            // letter of a name leaves the way out of it as it was).
            if !closing.depth.in_string() {
                closing.tail.clear();
            } else if closing.tail.first() == Some(&token) {
                closing.tail.remove(0);
            }
        }
    }

    /// Samples among the tokens `allowed` admits. `None` when it admits none.
    pub fn sample(&mut self, logits: &[f32], allowed: impl Fn(u32) -> bool) -> Option<u32> {
        self.sample_steered(logits, allowed, |_| 0)
    }

    /// [`Self::sample`], and inside a JSON string that must close where the grammar does not allow
    /// the quote yet, steered towards a token after which it does. `accepts(tokens)` is a trial of the
    /// grammar: how many of the tokens, in order, it would take from here. Asked first of the
    /// [`LOOKAHEAD`] best allowed tokens and the allowed one-byte punctuation, each followed by the
    /// quote; those that let it follow get the quote's bonus. When none does, the first token of a
    /// longer tail of one-byte tokens (`tail.rs`) gets it, and the tail is followed while the answer
    /// takes it.
    pub fn sample_steered(&mut self, logits: &[f32], allowed: impl Fn(u32) -> bool, accepts: impl FnMut(&[u32]) -> usize) -> Option<u32> {
        self.scratch.clear();
        // Sorted by token id, as the logits are walked: one pass applies them.
        let adjustments = self.history.adjustments(&self.params.penalties);
        let mut next = adjustments.iter().peekable();
        let produced = self.produced;
        let bonus = self.closing.as_mut().map(|c| (c.depth.bonus(produced, c.budget, &c.tokens), Arc::clone(&c.tokens)));
        let bonus = bonus.filter(|(b, _)| *b != Bonus::None);
        self.scratch.extend(logits.iter().enumerate().filter_map(|(id, &logit)| {
            let mut logit = logit;
            if let Some((bonus, tokens)) = &bonus {
                logit += bonus.of(id, tokens);
            }
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
        let in_string = self.closing.as_ref().is_some_and(|c| c.depth.in_string());
        if let Some((bonus, tokens)) = bonus.filter(|_| in_string) {
            if let Some(quote) = tokens.quote().filter(|&q| !allowed(q)) {
                self.steer(quote, bonus.strength(), &tokens, accepts, &allowed);
            }
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

    /// Adds `strength` to the allowed tokens after which the grammar takes `quote`, asked of the best
    /// ones and of the punctuation; failing those, to the first token of a tail that reaches it.
    fn steer(
        &mut self,
        quote: u32,
        strength: f32,
        tokens: &JsonTokens,
        mut accepts: impl FnMut(&[u32]) -> usize,
        allowed: impl Fn(u32) -> bool,
    ) {
        // The best allowed, kept in descending order as the scratch is read: no copy of the whole step.
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(LOOKAHEAD + 1);
        for &(id, logit) in &self.scratch {
            if best.len() == LOOKAHEAD && best.last().is_some_and(|&(_, worst)| logit <= worst) {
                continue;
            }
            let at = best.partition_point(|&(_, l)| l >= logit);
            best.insert(at, (id, logit));
            best.truncate(LOOKAHEAD);
        }
        let mut candidates: Vec<u32> = best.iter().map(|&(id, _)| id).collect();
        let punctuation: Vec<u32> = tokens.punctuation().iter().copied().filter(|&id| allowed(id) && !candidates.contains(&id)).collect();
        candidates.extend(punctuation);
        let mut favoured: Vec<u32> = candidates.into_iter().filter(|&t| accepts(&[t, quote]) == 2).collect();
        if favoured.is_empty() {
            favoured.extend(self.tail_step(quote, tokens, accepts));
        }
        for id in favoured {
            // The scratch is in id order.
            if let Ok(at) = self.scratch.binary_search_by_key(&id, |&(id, _)| id) {
                self.scratch[at].1 += strength;
            }
        }
    }

    /// The next token of a tail after which the grammar takes `quote`: the rest of the one the answer
    /// follows while it still reaches the quote, else a new one while the answer has trials left.
    fn tail_step(&mut self, quote: u32, tokens: &JsonTokens, mut accepts: impl FnMut(&[u32]) -> usize) -> Option<u32> {
        let closing = self.closing.as_mut()?;
        if !closing.tail.is_empty() {
            let mut trial = closing.tail.clone();
            trial.push(quote);
            if accepts(&trial) == trial.len() {
                return closing.tail.first().copied();
            }
            closing.tail.clear();
        }
        closing.tail = tail_to_quote(accepts, quote, tokens.alphabet(), tokens.punctuation().len(), &mut closing.trials)?;
        closing.tail.first().copied()
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
    fn a_json_answer_near_its_budget_takes_the_closer_the_grammar_allows() {
        // Token 0 is `"`, 1 is `]`, 2 is `x`, 3 is `},{`; the model prefers `x` by 5.
        let tokens: Arc<JsonTokens> = Arc::new(JsonTokens::new(["\"", "]", "x", "},{"].iter().map(|p| p.as_bytes().to_vec())));
        let params = SamplingParams { temperature: 0.0, close_json: true, ..SamplingParams::default() };
        let logits = [0.0, 0.0, 5.0, 1.0];
        let mut roomy = Sampler::new(params).closing_json(1000, Arc::clone(&tokens));
        roomy.record(2, br#"{"a":"x"#);
        assert_eq!(roomy.sample(&logits, |_| true), Some(2), "far from the budget nothing changes");
        let mut tight = Sampler::new(params).closing_json(10, Arc::clone(&tokens));
        tight.record(2, br#"{"a":"x"#);
        assert_eq!(tight.sample(&logits, |_| true), Some(0), "inside the string: the quote");
        assert_eq!(tight.sample(&logits, |id| id != 0), Some(2), "the grammar still decides");
        let mut in_array = Sampler::new(params).closing_json(10, Arc::clone(&tokens));
        in_array.record(2, br#"{"a":["x","#);
        assert_eq!(in_array.sample(&logits, |_| true), Some(1), "in an array: `]`");
        assert_eq!(in_array.sample(&logits, |id| id != 1), Some(2), "and not a quote: without `]`, x wins over `\"`");
        let mut in_item = Sampler::new(params).closing_json(10, Arc::clone(&tokens));
        in_item.record(2, br#"[{"a":1"#);
        assert_eq!(in_item.sample(&logits, |id| id != 2), Some(3), "`}},{{` opens what it closes: no bonus, the model's own order");
        let mut runaway = Sampler::new(params).closing_json(1000, Arc::clone(&tokens));
        runaway.record(2, format!(r#"{{"a":"{}"#, "1257-".repeat(40)).as_bytes());
        assert_eq!(runaway.sample(&logits, |_| true), Some(0), "a word of 200 bytes: the quote, budget or not");
        let mut off = Sampler::new(SamplingParams { close_json: false, ..params }).closing_json(10, tokens);
        off.record(2, br#"{"a":"x"#);
        assert_eq!(off.sample(&logits, |_| true), Some(2), "off unless asked");
    }

    /// A greedy sampler 80 bytes into a string, and logits over token 0 `"`, 1 `:`, 2 `/`, then 20
    /// letters the model prefers, `a` (3) most.
    fn in_a_runaway_string() -> (Vec<f32>, SamplingParams, Sampler) {
        let mut pieces: Vec<Vec<u8>> = vec![b"\"".to_vec(), b":".to_vec(), b"/".to_vec()];
        pieces.extend((b'a'..=b't').map(|b| vec![b]));
        let tokens = Arc::new(JsonTokens::new(pieces.into_iter()));
        let mut logits = vec![-5.0f32, -4.0, -4.0, 6.0];
        logits.extend((0..19).map(|i| f32::from(i16::try_from(i).unwrap()) / 10.0));
        let params = SamplingParams { temperature: 0.0, close_json: true, ..SamplingParams::default() };
        let mut sampler = Sampler::new(params).closing_json(1000, tokens);
        sampler.record(3, format!(r#"{{"u":"{}"#, "ab".repeat(40)).as_bytes());
        (logits, params, sampler)
    }

    #[test]
    fn a_string_that_must_close_where_the_quote_is_not_allowed_takes_a_token_after_which_it_is() {
        let (logits, params, mut sampler) = in_a_runaway_string();
        let mut asked = Vec::new();
        let no_quote = |id: u32| id != 0;
        let token = sampler.sample_steered(&logits, no_quote, |trial: &[u32]| {
            assert_eq!(trial.len(), 2);
            assert_eq!(trial[1], 0, "each candidate is tried with the quote after it");
            asked.push(trial[0]);
            if trial[0] == 1 {
                2
            } else {
                1
            }
        });
        assert_eq!(token, Some(1), "`:` lets the quote follow: it takes the runaway's bonus");
        assert!(asked.contains(&1) && asked.contains(&2), "punctuation is asked about however low the model ranks it: {asked:?}");
        assert!(!asked.contains(&0), "not the quote itself");
        assert_eq!(asked.len(), LOOKAHEAD + 2, "the 16 best, and the punctuation below them");
        let mut roomy = Sampler::new(params).closing_json(1000, Arc::new(JsonTokens::default()));
        roomy.record(3, br#"{"u":"ab"#);
        let token = roomy.sample_steered(&logits, no_quote, |_| panic!("nothing to close: the grammar is not asked"));
        assert_eq!(token, Some(3));
    }

    #[test]
    fn a_string_that_closes_only_after_a_tail_of_several_bytes_is_steered_along_it() {
        // The grammar: a `:` only right after a `/`, and the quote only right after `/:`.
        let (logits, _, mut sampler) = in_a_runaway_string();
        // 0: after a letter, 1: after `/`, 2: after `/:`.
        let step = |state: u8, token: u32| match (state, token) {
            (2, 0) => Some(3),
            (1, 1) => Some(2),
            (_, 2) => Some(1),
            (_, 3..) => Some(0),
            _ => None,
        };
        let mut state = 0;
        let mut chosen = Vec::new();
        for _ in 0..3 {
            let accepts = |trial: &[u32]| {
                let mut s = state;
                trial.iter().take_while(|&&t| step(s, t).map(|next| s = next).is_some()).count()
            };
            let allowed = |id: u32| step(state, id).is_some();
            let token = sampler.sample_steered(&logits, allowed, accepts).unwrap();
            state = step(state, token).unwrap();
            sampler.record(token, if token == 0 { b"\"" } else { b"x" });
            chosen.push(token);
        }
        assert_eq!(chosen, vec![2, 1, 0], "`/`, then `:`, then the quote, though the model prefers `a` throughout");
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
