//! The request mix: which kinds of request a run sends, and in what proportion.
//!
//! Kinds are picked by smooth weighted round-robin (nginx's), not at random: every window of
//! `Σ weights` requests holds each kind exactly `weight` times, evenly spread, so a short run has the
//! proportions asked for and two runs with the same mix send the same sequence.

use std::fmt;
use std::str::FromStr;

/// What one request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A non-streamed chat completion.
    Plain,
    /// A non-streamed chat completion with `response_format` `json_schema` (a small object).
    JsonSchema,
    /// A streamed chat completion with `stream_options.include_usage`.
    Stream,
    /// A streamed chat completion the client drops after the first content chunk.
    Abandon,
    /// A non-streamed constrained answer that takes all of `max_tokens` (a JSON array with more items
    /// than fit): the long requests of a flooding tenant.
    Long,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Plain, Kind::JsonSchema, Kind::Stream, Kind::Abandon, Kind::Long];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::JsonSchema => "json_schema",
            Kind::Stream => "stream",
            Kind::Abandon => "abandon",
            Kind::Long => "long",
        }
    }

    #[must_use]
    pub fn is_stream(self) -> bool {
        matches!(self, Kind::Stream | Kind::Abandon)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    #[error("`{0}` is not `kind=weight`")]
    NotAPair(String),
    #[error("unknown kind `{0}` (kinds: plain, json_schema, stream, abandon, long)")]
    UnknownKind(String),
    #[error("weight `{0}` is not a whole number")]
    BadWeight(String),
    #[error("kind `{0}` appears twice")]
    Repeated(&'static str),
    #[error("the mix has no kind with a weight above 0")]
    Empty,
}

/// Kinds with positive weights, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    entries: Vec<(Kind, u32)>,
}

impl Mix {
    #[must_use]
    pub fn entries(&self) -> &[(Kind, u32)] {
        &self.entries
    }

    #[must_use]
    pub fn has(&self, kind: Kind) -> bool {
        self.entries.iter().any(|(k, _)| *k == kind)
    }

    #[must_use]
    pub fn picker(&self) -> Picker {
        Picker { entries: self.entries.clone(), current: vec![0; self.entries.len()] }
    }
}

impl FromStr for Mix {
    type Err = MixError;

    /// `plain=4,json_schema=3,stream=2,abandon=1`; a kind of weight 0 is left out.
    fn from_str(text: &str) -> Result<Self, MixError> {
        let mut entries: Vec<(Kind, u32)> = Vec::new();
        let mut seen: Vec<Kind> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part.split_once('=').ok_or_else(|| MixError::NotAPair(part.to_owned()))?;
            let kind =
                Kind::ALL.into_iter().find(|k| k.name() == name.trim()).ok_or_else(|| MixError::UnknownKind(name.trim().to_owned()))?;
            let weight: u32 = weight.trim().parse().map_err(|_| MixError::BadWeight(weight.trim().to_owned()))?;
            if seen.contains(&kind) {
                return Err(MixError::Repeated(kind.name()));
            }
            seen.push(kind);
            if weight > 0 {
                entries.push((kind, weight));
            }
        }
        if entries.is_empty() {
            return Err(MixError::Empty);
        }
        Ok(Self { entries })
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.entries.iter().map(|(k, w)| format!("{k}={w}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// Smooth weighted round-robin over a [`Mix`].
#[derive(Debug, Clone)]
pub struct Picker {
    entries: Vec<(Kind, u32)>,
    current: Vec<i64>,
}

impl Picker {
    pub fn next_kind(&mut self) -> Kind {
        let total: i64 = self.entries.iter().map(|(_, w)| i64::from(*w)).sum();
        let mut best = 0;
        for (i, (_, weight)) in self.entries.iter().enumerate() {
            self.current[i] += i64::from(*weight);
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= total;
        self.entries[best].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let mix: Mix = "plain=4, json_schema=3,stream=2,abandon=1".parse().unwrap();
        assert_eq!(mix.entries(), &[(Kind::Plain, 4), (Kind::JsonSchema, 3), (Kind::Stream, 2), (Kind::Abandon, 1)]);
        assert_eq!(mix.to_string(), "plain=4,json_schema=3,stream=2,abandon=1");
        let only: Mix = "stream=1,abandon=0".parse().unwrap();
        assert!(!only.has(Kind::Abandon));
        assert_eq!("plain".parse::<Mix>(), Err(MixError::NotAPair("plain".into())));
        assert_eq!("chat=1".parse::<Mix>(), Err(MixError::UnknownKind("chat".into())));
        assert_eq!("plain=x".parse::<Mix>(), Err(MixError::BadWeight("x".into())));
        assert_eq!("plain=1,plain=2".parse::<Mix>(), Err(MixError::Repeated("plain")));
        assert_eq!("plain=0".parse::<Mix>(), Err(MixError::Empty));
    }

    #[test]
    fn every_window_holds_the_exact_proportions() {
        let mix: Mix = "plain=4,json_schema=3,stream=2,abandon=1".parse().unwrap();
        let mut picker = mix.picker();
        for _ in 0..3 {
            let window: Vec<Kind> = (0..10).map(|_| picker.next_kind()).collect();
            for (kind, weight) in mix.entries() {
                assert_eq!(window.iter().filter(|k| *k == kind).count(), *weight as usize, "{window:?}");
            }
        }
    }
}
