//! GBNF grammars, enforced by llama.cpp's own grammar engine.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

use super::Refusal;

/// Grammars past this size are refused: llama.cpp parses them recursively.
const MAX_GBNF_BYTES: usize = 64 * 1024;

/// Parses the grammar with llama.cpp once, so a bad grammar is refused before admission.
pub(super) fn check(model: &LlamaModel, text: &str) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(Refusal::Unenforceable("the grammar is empty".into()));
    }
    if text.len() > MAX_GBNF_BYTES {
        return Err(Refusal::Unenforceable(format!("the grammar is longer than {MAX_GBNF_BYTES} bytes")));
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
}
