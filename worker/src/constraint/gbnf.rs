//! GBNF grammars, enforced by llama.cpp's own grammar engine.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

use super::Refusal;

/// Grammars past this size are refused: llama.cpp parses them recursively.
const MAX_GBNF_BYTES: usize = 64 * 1024;

/// llama.cpp parses groups recursively: a grammar of thousands of nested parentheses would overflow the
/// engine thread's stack and take the whole process down, so deep nesting is refused first.
const MAX_NESTING: usize = 64;

/// Parses the grammar with llama.cpp once, so a bad grammar is refused before admission.
pub(super) fn check(model: &LlamaModel, text: &str) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(Refusal::Unenforceable("the grammar is empty".into()));
    }
    if text.len() > MAX_GBNF_BYTES {
        return Err(Refusal::Unenforceable(format!("the grammar is longer than {MAX_GBNF_BYTES} bytes")));
    }
    if nesting_depth(text) > MAX_NESTING {
        return Err(Refusal::Unenforceable(format!("the grammar nests groups deeper than {MAX_NESTING} levels")));
    }
    if !defines_root(text) {
        return Err(Refusal::Unenforceable("the grammar has no `root ::=` rule".into()));
    }
    sampler(model, text).map(drop)
}

pub(super) fn sampler(model: &LlamaModel, text: &str) -> Result<LlamaSampler, Refusal> {
    LlamaSampler::grammar(model, text, "root").map_err(|e| {
        // llama.cpp reports the parse position only to its log; the worker log has it.
        Refusal::Unenforceable(format!("llama.cpp could not parse the GBNF grammar ({e}); check its syntax"))
    })
}

/// The deepest nesting of `(` groups, outside string literals and character classes.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(close), c) if c == close => quote = None,
            (Some(_), _) => {}
            (None, '"') => quote = Some('"'),
            (None, '[') => quote = Some(']'),
            (None, '#') => quote = Some('\n'),
            (None, '(') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ')') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn defines_root(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix("root").is_some_and(|rest| rest.trim_start().starts_with("::="))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_root_rule() {
        assert!(super::defines_root("root ::= \"yes\" | \"no\""));
        assert!(super::defines_root("a ::= \"x\"\n  root::= a"));
        assert!(!super::defines_root("rooted ::= \"x\""));
    }

    #[test]
    fn measures_nesting_outside_literals() {
        assert_eq!(super::nesting_depth("root ::= ((\"a\") | \"(((\" [(] )"), 2);
        assert_eq!(super::nesting_depth("root ::= \"\\\"(\" # ((( comment\n"), 0);
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(super::nesting_depth(&deep), 5000);
    }
}
