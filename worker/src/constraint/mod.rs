//! Constraints on what the model may write: JSON Schema and `json_object` through llguidance, GBNF
//! through llama.cpp's grammar engine.
//!
//! Every constraint is compiled (and so validated) before a request is admitted, so a constraint the
//! engine cannot enforce is refused before a single token is generated. Compiled constraints are cached
//! by the SHA-256 of their canonical text within the tenant's cache scope; refusals are cached too, so a
//! bad schema sent in a loop costs one compile. The scope is part of the key because a fast answer tells
//! the sender that the same schema was compiled recently: shared across tenants, that would tell one
//! tenant another's field names and enums.

mod cache;
mod gbnf;
mod narrow;
mod one_of;
mod overlap;
mod paths;
mod pattern;
mod schema;
mod shape;
mod tighten;
mod unroll;

use std::sync::Arc;
use std::time::{Duration, Instant};

use llama_cpp_2::model::LlamaModel;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use runaii_wire::cache_scope::CacheScope;
use serde_json::Value;

pub use schema::{compact_separators, embedded_for_grammar, OutputValidator, OutputViolation};

use cache::ConstraintCache;

/// What a request asked to constrain its answer to.
#[derive(Debug, Clone)]
pub enum ConstraintSpec {
    /// `response_format: json_object`: any JSON object.
    JsonObject,
    /// `response_format: json_schema`.
    JsonSchema(Value),
    /// The `grammar` extension: GBNF text with a `root` rule.
    Gbnf(String),
    /// A grammar in llguidance's Lark dialect, built by the worker (tool calls), never sent by a client.
    Lark(String),
}

impl ConstraintSpec {
    fn cache_key(&self, scope: &CacheScope) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(u64::try_from(scope.as_bytes().len()).unwrap_or(u64::MAX).to_le_bytes());
        hasher.update(scope.as_bytes());
        match self {
            Self::JsonObject => hasher.update(b"json_object"),
            Self::JsonSchema(schema) => {
                hasher.update(b"json_schema\0");
                hasher.update(schema.to_string().as_bytes());
            }
            Self::Gbnf(text) => {
                hasher.update(b"gbnf\0");
                hasher.update(text.as_bytes());
            }
            Self::Lark(text) => {
                hasher.update(b"lark\0");
                hasher.update(text.as_bytes());
            }
        }
        hasher.finalize().into()
    }
}

/// Why a constraint was refused. The message carries the engine's own reason.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// The schema is not a valid JSON Schema.
    #[error("invalid JSON Schema: {0}")]
    InvalidSchema(String),
    /// A valid schema (or grammar) that the engine cannot enforce exactly.
    #[error("the constraint engine cannot enforce this constraint: {0}")]
    Unenforceable(String),
}

/// A compiled constraint, shared by every request that sends the same one.
#[derive(Debug)]
pub struct Compiled {
    grammar: CompiledGrammar,
    validator: Option<Arc<OutputValidator>>,
    compile_time: Duration,
}

enum CompiledGrammar {
    /// A matcher in its start state; each request works on a deep clone.
    Llguidance(Box<Matcher>),
    /// GBNF checked by llama.cpp's parser; each request builds its own sampler from the text.
    Gbnf(String),
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Llguidance(_) => f.write_str("Llguidance"),
            Self::Gbnf(_) => f.write_str("Gbnf"),
        }
    }
}

impl Compiled {
    /// The second layer: validates a finished answer against the schema.
    #[must_use]
    pub fn validator(&self) -> Option<Arc<OutputValidator>> {
        self.validator.clone()
    }

    #[must_use]
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// A fresh per-request constraint state.
    ///
    /// # Errors
    /// Only if llama.cpp refuses a grammar it accepted at compile time (it should not).
    pub fn start(&self, model: &LlamaModel) -> Result<ActiveConstraint, Refusal> {
        match &self.grammar {
            CompiledGrammar::Llguidance(matcher) => Ok(ActiveConstraint::Llguidance(Box::new(matcher.deep_clone()))),
            CompiledGrammar::Gbnf(text) => gbnf::sampler(model, text).map(ActiveConstraint::Gbnf),
        }
    }
}

/// The per-request state of a constraint, advanced token by token by the engine.
pub enum ActiveConstraint {
    Llguidance(Box<Matcher>),
    Gbnf(llama_cpp_2::sampling::LlamaSampler),
}

impl std::fmt::Debug for ActiveConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Llguidance(_) => f.write_str("ActiveConstraint::Llguidance"),
            Self::Gbnf(_) => f.write_str("ActiveConstraint::Gbnf"),
        }
    }
}

/// Compiles constraints against one model's vocabulary.
pub struct ConstraintCompiler {
    factory: ParserFactory,
    model: Arc<LlamaModel>,
    /// The context of one sequence: a schema demanding a longer answer is refused.
    context_tokens: u64,
    cache: ConstraintCache<Result<Arc<Compiled>, Refusal>>,
}

impl std::fmt::Debug for ConstraintCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstraintCompiler").finish_non_exhaustive()
    }
}

/// How many compiled constraints (and refusals) are kept.
const CACHE_ENTRIES: usize = 512;

impl ConstraintCompiler {
    /// Builds the token environment and parser factory once per model: creating them walks the whole
    /// vocabulary (~100 ms), so requests only ever create parsers.
    ///
    /// # Errors
    /// When llguidance cannot build a factory for this vocabulary.
    pub fn new(model: Arc<LlamaModel>, context_tokens: u32) -> anyhow::Result<Self> {
        let tok_env = llama_cpp_2::sampling::LlamaSampler::llguidance_tok_env(&model);
        let mut factory = ParserFactory::new_simple(&tok_env)?;
        factory.quiet();
        Ok(Self { factory, model, context_tokens: u64::from(context_tokens), cache: ConstraintCache::new(CACHE_ENTRIES) })
    }

    /// Compiles (or fetches from `scope`'s part of the cache) a constraint. CPU-bound: call from a
    /// blocking thread.
    ///
    /// # Errors
    /// A [`Refusal`] when the constraint is invalid or cannot be enforced exactly.
    pub fn compile(&self, spec: &ConstraintSpec, scope: &CacheScope) -> Result<Arc<Compiled>, Refusal> {
        let key = spec.cache_key(scope);
        if let Some(hit) = self.cache.get(&key) {
            return hit;
        }
        let started = Instant::now();
        let compiled = self.compile_uncached(spec).map(|(grammar, validator)| {
            Arc::new(Compiled { grammar, validator: validator.map(Arc::new), compile_time: started.elapsed() })
        });
        self.cache.insert(key, compiled.clone());
        compiled
    }

    fn compile_uncached(&self, spec: &ConstraintSpec) -> Result<(CompiledGrammar, Option<OutputValidator>), Refusal> {
        match spec {
            ConstraintSpec::JsonObject => {
                let schema = serde_json::json!({"type": "object"});
                self.compile_schema(&schema)
            }
            ConstraintSpec::JsonSchema(schema) => self.compile_schema(schema),
            ConstraintSpec::Gbnf(text) => {
                gbnf::check(&self.model, text)?;
                Ok((CompiledGrammar::Gbnf(text.clone()), None))
            }
            ConstraintSpec::Lark(text) => Ok((self.matcher(TopLevelGrammar::from_lark(text.clone()))?, None)),
        }
    }

    fn matcher(&self, grammar: TopLevelGrammar) -> Result<CompiledGrammar, Refusal> {
        let parser = self.factory.create_parser(grammar).map_err(|e| Refusal::Unenforceable(first_line(&e.to_string())))?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(err) = matcher.get_error() {
            return Err(Refusal::Unenforceable(first_line(&err)));
        }
        // llguidance warns where it approximates: an approximation would pass answers the second layer
        // then rejects, so none is accepted (`oneOf` arrives here already made exact).
        if let Some(warning) = matcher.grammar_warnings().into_iter().next() {
            return Err(Refusal::Unenforceable(warning));
        }
        Ok(CompiledGrammar::Llguidance(Box::new(matcher)))
    }

    fn compile_schema(&self, schema: &Value) -> Result<(CompiledGrammar, Option<OutputValidator>), Refusal> {
        // Linear and cheap, so a schema bomb never reaches the validator or grammar builders.
        runaii_wire::schema_budget::check(schema, self.context_tokens).map_err(|e| Refusal::Unenforceable(e.0))?;
        let validator = OutputValidator::new(schema)?;
        let grammar = match self.matcher(TopLevelGrammar::from_json_schema(schema::for_grammar(schema)?)) {
            // A recursive definition the engine had to intersect with itself: compiled again with its
            // recursion unrolled (`unroll.rs`), or refused for the first reason. The grammar's copy is
            // built again there rather than kept (cloned) for every schema on the way in.
            Err(Refusal::Unenforceable(reason)) if reason.contains(unroll::ENGINE_REFUSAL) => {
                unroll::unroll(&schema::for_grammar(schema)?, unroll::DEPTH)
                    .and_then(|unrolled| self.matcher(TopLevelGrammar::from_json_schema(unrolled)).ok())
                    .ok_or(Refusal::Unenforceable(reason))?
            }
            compiled => compiled?,
        };
        Ok((grammar, Some(validator)))
    }
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}
