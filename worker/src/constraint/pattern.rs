//! `pattern`s narrowed into ones the engine reads the way the second-layer validator does.
//!
//! - **Characters the two read differently.** A JSON Schema `pattern` is an ECMA-262 regular expression;
//!   the engine reads it as Rust's `regex` does. The two disagree on a few characters: `.` admits `\r`,
//!   U+2028 and U+2029 for the engine and not for ECMA, `\s` admits U+0085 for the engine and U+FEFF for
//!   ECMA. A grammar that admits a character the validator rejects ends an answer in `500
//!   output_validation_failed`, so those five characters are taken out of every class of the grammar's
//!   pattern (a pattern naming one of them as a literal keeps it: both read a literal alike).
//! - **Assertions inside a pattern.** The engine compiles a pattern to a derivative-based automaton that
//!   understands `^` and `$` only where they anchor the whole. Real schemas put them elsewhere: a host
//!   name pattern that admits a leading `*.` writes `(?:(?:^\*|label)\.)*`. In a pattern the engine
//!   refuses, every assertion that does not anchor the whole (`^`, `$`, `\b` inside it) is replaced by a
//!   part that never matches.
//!
//! Regular expressions only grow with their parts, so a rewritten pattern matches a subset of the
//! strings the original matches, never more; the validator still checks the original. A pattern the
//! rewrite leaves matching nothing is kept as it was, and the engine refuses it as before.

use llguidance::derivre::{ExprRef, RegexAst, RegexBuilder};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look};

/// The work one pattern's match may take.
const MATCH_FUEL: u64 = 100_000;

/// `pattern` as the engine reads a JSON Schema `pattern`: a search, with `\d` and `\w` in ASCII.
fn engine_search(pattern: &str) -> Option<(RegexBuilder, ExprRef)> {
    let mut builder = RegexBuilder::new();
    let expression = builder.mk(&RegexAst::SearchRegex(llguidance::regex_to_lark(pattern, "dw"))).ok()?;
    Some((builder, expression))
}

/// Whether the engine compiles `pattern`, and it matches something.
fn engine_reads(pattern: &str) -> bool {
    engine_search(pattern).is_some_and(|(_, expression)| expression != ExprRef::NO_MATCH)
}

/// Whether the engine takes `text` to match `pattern` (as it decides which pattern applies to a named
/// property); `false` when it cannot tell within [`MATCH_FUEL`].
pub(super) fn engine_matches(pattern: &str, text: &str) -> bool {
    engine_search(pattern)
        .and_then(|(builder, expression)| builder.to_regex_limited(expression, MATCH_FUEL).ok())
        .is_some_and(|mut regex| regex.is_match(text))
}

/// `pattern` narrowed (see the module's list), or `None` when it needs nothing or no narrowing compiles.
pub(super) fn narrowed(pattern: &str) -> Option<String> {
    let hir = regex_syntax::ParserBuilder::new().build().parse(&llguidance::regex_to_lark(pattern, "dw")).ok()?;
    let mut rewrite = Rewrite { drop_assertions: !engine_reads(pattern), changed: false };
    let narrowed = match hir.into_kind() {
        // Anchors of the whole stay.
        HirKind::Concat(parts) => {
            let last = parts.len().saturating_sub(1);
            let parts = parts.into_iter().enumerate().map(|(i, part)| match part.kind() {
                HirKind::Look(Look::Start) if i == 0 => part,
                HirKind::Look(Look::End) if i == last => part,
                _ => rewrite.apply(part),
            });
            Hir::concat(parts.collect())
        }
        kind => rewrite.apply(rebuild(kind)),
    };
    if !rewrite.changed {
        return None;
    }
    let text = narrowed.to_string();
    engine_reads(&text).then_some(text)
}

/// Characters `.` or `\s` admit for one of the engine and ECMA-262 and not for the other.
const DISPUTED: [char; 5] = ['\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{feff}'];

struct Rewrite {
    drop_assertions: bool,
    changed: bool,
}

impl Rewrite {
    fn apply(&mut self, hir: Hir) -> Hir {
        match hir.into_kind() {
            HirKind::Look(_) if self.drop_assertions => {
                self.changed = true;
                Hir::fail()
            }
            HirKind::Class(Class::Unicode(mut class)) => {
                let disputed = ClassUnicode::new(DISPUTED.iter().map(|c| ClassUnicodeRange::new(*c, *c)));
                let before = class.clone();
                class.difference(&disputed);
                self.changed |= class != before;
                Hir::class(Class::Unicode(class))
            }
            HirKind::Repetition(mut repetition) => {
                repetition.sub = Box::new(self.apply(*repetition.sub));
                Hir::repetition(repetition)
            }
            HirKind::Capture(mut capture) => {
                capture.sub = Box::new(self.apply(*capture.sub));
                Hir::capture(capture)
            }
            HirKind::Concat(parts) => Hir::concat(parts.into_iter().map(|part| self.apply(part)).collect()),
            HirKind::Alternation(parts) => Hir::alternation(parts.into_iter().map(|part| self.apply(part)).collect()),
            kind => rebuild(kind),
        }
    }
}

/// A node from its kind (`Hir` has the way out, `into_kind`, and no way back).
fn rebuild(kind: HirKind) -> Hir {
    match kind {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(literal) => Hir::literal(literal.0),
        HirKind::Class(class) => Hir::class(class),
        HirKind::Look(look) => Hir::look(look),
        HirKind::Repetition(repetition) => Hir::repetition(repetition),
        HirKind::Capture(capture) => Hir::capture(capture),
        HirKind::Concat(parts) => Hir::concat(parts),
        HirKind::Alternation(parts) => Hir::alternation(parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    /// As the second layer reads a `pattern`.
    fn search(pattern: &str, text: &str) -> bool {
        jsonschema::validator_for(&json!({"pattern": pattern})).expect("a valid pattern").is_valid(&json!(text))
    }

    #[test]
    fn a_start_anchor_inside_a_repetition_is_dropped_and_nothing_widens() {
        let pattern = r"^(?:(?:^[\*]|[a-z0-9]+)\.)*[a-z0-9]+$";
        let out = narrowed(pattern).expect("narrowed");
        for host in ["example.com", "a.b.example", "localhost"] {
            assert!(search(&out, host), "{host} still matches {out}");
        }
        assert!(search(pattern, "*.example.com") && !search(&out, "*.example.com"), "the wildcard form is left out");
        for text in ["", "a..b", "-", "a.*.b"] {
            assert!(!search(&out, text) || search(pattern, text), "{text} matches the narrowed {out} but not the original");
        }
    }

    #[test]
    fn characters_read_differently_are_left_out_of_classes() {
        let base64 = r"^(?:\s*[A-Za-z0-9+/]){4}\s*$";
        let out = narrowed(base64).expect("\\s narrowed");
        assert!(search(&out, "ab\tc d ") && search(&out, "abcd\u{3000}"), "{out}");
        assert!(search(base64, "abcd\u{feff}") && !search(&out, "abcd\u{feff}"), "ECMA's whitespace the engine's \\s lacks");
        assert!(!search(&out, "abcd\u{85}"), "the engine's whitespace ECMA's \\s lacks");
        let any = narrowed("^a.b$").expect(". narrowed");
        assert!(search(&any, "a-b") && !search(&any, "a\rb") && !search(&any, "a\u{2028}b"), "{any}");
    }

    #[test]
    fn patterns_the_engine_reads_alike_or_that_would_match_nothing_are_left_alone() {
        assert_eq!(narrowed(r"^[a-z]+$"), None);
        assert_eq!(narrowed(r"^\d{3}-\w+$"), None);
        assert_eq!(narrowed(r"^a|^b"), None, "anchors at the start of each branch are read");
        assert_eq!(narrowed(r"\bword\b"), None, "nothing is left once the assertions are gone");
    }
}
