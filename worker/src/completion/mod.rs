//! Turning a chat completion request into an engine job: every check that can refuse a request runs
//! here, before admission, so a refused request never takes a slot or generates a token.

pub mod answer;
mod messages;
mod reasoning;
mod sampling;

use std::sync::Arc;
use std::time::Instant;

use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;
use runaii_wire::{ChatCompletionRequest, ResponseFormat};
use tokio::sync::mpsc;

use crate::constraint::{Compiled, ConstraintSpec, OutputValidator};
use crate::engine::receipt::ReceiptWriter;
use crate::engine::{ChoiceEvent, Job, Loaded, SamplingParams};
use crate::error::ApiError;
use crate::template::ChatTemplate;
use crate::tools::markers::Markers;
use crate::tools::{grammar, Choice, ToolFormat, ToolRequest};

/// A checked request, ready to submit.
#[derive(Debug)]
pub struct Prepared {
    pub prompt: Vec<llama_cpp_2::token::LlamaToken>,
    /// Answers asked for (`n`), each in its own sequence from one reading of the prompt.
    pub choices: u32,
    pub max_tokens: u32,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub constraint: Option<Arc<Compiled>>,
    /// The request's tools, when it offers any: the answer is read for calls.
    pub tools: Option<Arc<ToolRequest>>,
    /// With tools and `response_format` together, the schema a text answer (not a call) must match.
    pub answer_validator: Option<Arc<OutputValidator>>,
    /// With `logprobs: true`: how many alternatives each token lists.
    pub logprobs: Option<usize>,
    /// Control tokens the answer keeps as text (the template's call markers).
    pub kept: Arc<[u32]>,
}

impl Prepared {
    #[must_use]
    pub fn validator(&self) -> Option<Arc<OutputValidator>> {
        if self.tools.is_some() {
            return self.answer_validator.clone();
        }
        self.constraint.as_ref().and_then(|c| c.validator())
    }

    /// Hands the job to the engine's bounded queue, in its tenant's lane (`cache_scope`, whose cached
    /// prefixes alone its prompt may reuse) of its `priority` class.
    ///
    /// # Errors
    /// [`ApiError::Overloaded`] when the queue is full.
    pub fn submit(
        self,
        loaded: &Loaded,
        cache_scope: CacheScope,
        priority: Priority,
        receipt: Option<ReceiptWriter>,
    ) -> Result<mpsc::UnboundedReceiver<ChoiceEvent>, ApiError> {
        let (events, receiver) = mpsc::unbounded_channel();
        let job = Job {
            prompt: self.prompt,
            choices: self.choices,
            max_tokens: self.max_tokens,
            sampling: self.sampling,
            stop: self.stop,
            constraint: self.constraint,
            events,
            enqueued: Instant::now(),
            cache_scope: cache_scope.clone(),
            priority,
            receipt: receipt.map(Arc::new),
            logprobs: self.logprobs,
            kept: self.kept,
        };
        loaded.jobs.push(priority, cache_scope, job).map_err(|_| ApiError::Overloaded)?;
        Ok(receiver)
    }
}

const MAX_STOP_SEQUENCES: usize = 4;

/// Checks the request and builds its job.
///
/// # Errors
/// An [`ApiError`] (4xx) for anything the worker will not run.
pub async fn prepare(
    request: &ChatCompletionRequest,
    loaded: &Arc<Loaded>,
    template: &ChatTemplate,
    scope: &CacheScope,
    model_id: &str,
    default_max_tokens: u32,
) -> Result<Prepared, ApiError> {
    if request.model != model_id {
        return Err(ApiError::ModelNotFound(request.model.clone()));
    }
    let choices = choices(request.n, loaded.settings.slots)?;
    let tools = ToolRequest::from_request(
        request.tools.as_deref(),
        request.tool_choice.as_ref(),
        request.parallel_tool_calls,
        template.tool_format,
    )?;
    if tools.is_some() && !template.from_model {
        return Err(ApiError::InvalidRequest {
            message: "this model has no chat template, so it cannot be offered tools".into(),
            param: Some("tools"),
            code: "tools_unsupported",
        });
    }
    if request.stream_options.is_some() && !request.stream {
        return Err(ApiError::invalid("stream_options is only allowed when stream is true", "stream_options"));
    }
    let logprobs = logprobs(request, tools.as_ref(), template.tool_format)?;
    // Constrained JSON answers get the repetition guard and the closing bonus by default: that is where
    // small models loop. Tool calls are such JSON too, whenever the grammar holds the answer to JSON from
    // its first token.
    let json_schema = matches!(request.response_format, Some(ResponseFormat::JsonSchema { .. }));
    let constrained_json = tools.as_ref().map_or(json_schema, |t| t.answers_in_json(json_schema));
    let sampling = sampling::params(request, constrained_json)?;
    let stop = request.stop.clone().map(runaii_wire::StopSequences::into_vec).unwrap_or_default();
    if stop.len() > MAX_STOP_SEQUENCES || stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid("stop takes up to 4 non-empty strings", "stop"));
    }
    let (spec, answer_validator) = match &tools {
        Some(tools) => tool_constraint(request, tools, &template.markers)?,
        None => (constraint_spec(request)?, None),
    };

    // With tools the tool grammar decides (`auto` is lazy: the model may think before calling).
    let json_answer = matches!(request.response_format, Some(ResponseFormat::JsonSchema { .. } | ResponseFormat::JsonObject));
    let constrained = tools.is_none() && (json_answer || request.grammar.is_some());
    let thinking = reasoning::thinking(request, template, constrained)?;
    let tool_json = tools.as_ref().filter(|t| t.format.renders_tools()).map(|t| t.openai_json());
    let rendered = template
        .render(&messages::for_template(&request.messages, tools.as_ref())?, tool_json.as_deref(), &thinking)
        .map_err(|e| ApiError::InvalidRequest { message: e.to_string(), param: Some("messages"), code: "invalid_messages" })?;
    let prompt = tokenize(loaded, template, &rendered);
    let max_tokens = max_tokens(request, prompt.len(), loaded.settings.ctx_per_slot, default_max_tokens)?;

    let constraint = match spec {
        None => None,
        Some((spec, param)) => {
            let compiler = Arc::clone(&loaded.compiler);
            let scope = scope.clone();
            let compiled = tokio::task::spawn_blocking(move || compiler.compile(&spec, &scope))
                .await
                .map_err(|e| ApiError::Internal(format!("constraint compile task failed: {e}")))?;
            Some(compiled.map_err(|refusal| ApiError::Refused { refusal, param })?)
        }
    };
    // Under `tool_choice: none` the tools were only described: the answer is read as plain text, or, from
    // a model that writes channels, for its final channel.
    let (tools, answer_validator) = match tools.filter(|t| t.choice != Choice::None) {
        None if template.tool_format == ToolFormat::Harmony => {
            let validator = answer_validator.or_else(|| constraint.as_ref().and_then(|c| c.validator()));
            (Some(ToolRequest::reading(ToolFormat::Harmony)), validator)
        }
        tools => (tools, answer_validator),
    };
    let kept = template.markers.kept().into();
    Ok(Prepared { prompt, choices, max_tokens, sampling, stop, constraint, tools: tools.map(Arc::new), answer_validator, logprobs, kept })
}

/// `n`: how many answers, at least one and at most the sequences the engine runs (they are decoded
/// together, one sequence each).
fn choices(n: Option<i64>, slots: u32) -> Result<u32, ApiError> {
    match n {
        None => Ok(1),
        Some(n) if n < 1 => Err(ApiError::invalid("n must be at least 1", "n")),
        Some(n) => u32::try_from(n).ok().filter(|&n| n <= slots).ok_or_else(|| {
            ApiError::invalid(format!("n must be at most {slots}: this model answers up to {slots} choices per request"), "n")
        }),
    }
}

/// `logprobs` and `top_logprobs`, checked as OpenAI checks them: `top_logprobs` 0 to 20, and only with
/// `logprobs: true`. Refused with tools that may be called: the answer's text is then read for calls
/// (and in the generic format the content is a string inside the model's JSON), so its tokens are not
/// the content's; and for a model that writes channels (Harmony), whose content is its final channel.
fn logprobs(request: &ChatCompletionRequest, tools: Option<&ToolRequest>, format: ToolFormat) -> Result<Option<usize>, ApiError> {
    let top = request.top_logprobs.unwrap_or(0);
    if top > runaii_wire::MAX_TOP_LOGPROBS {
        return Err(ApiError::invalid(format!("top_logprobs must be between 0 and {}", runaii_wire::MAX_TOP_LOGPROBS), "top_logprobs"));
    }
    let Some(top) = request.wanted_logprobs() else {
        if top > 0 {
            return Err(ApiError::invalid("top_logprobs needs logprobs: true", "top_logprobs"));
        }
        return Ok(None);
    };
    if format == ToolFormat::Harmony {
        return Err(ApiError::InvalidRequest {
            message: "log probabilities are not returned by this model: it writes its answer in channels (Harmony), \
                      so its tokens are not the content's"
                .into(),
            param: Some("logprobs"),
            code: "logprobs_unsupported",
        });
    }
    if tools.is_some_and(|t| t.choice != Choice::None) {
        return Err(ApiError::InvalidRequest {
            message: "log probabilities are not returned with tools the model may call: the answer's text is read for calls, \
                      so its tokens are not the content's. Send logprobs without tools, or with tool_choice `none`"
                .into(),
            param: Some("logprobs"),
            code: "logprobs_unsupported",
        });
    }
    Ok(Some(top as usize))
}

/// A tool request's constraint: the tools' grammar (which includes `response_format`), or with
/// `tool_choice: none` just `response_format`. A text answer under both is checked against the schema.
fn tool_constraint(
    request: &ChatCompletionRequest,
    tools: &ToolRequest,
    markers: &Markers,
) -> Result<(Option<Spec>, Option<Arc<OutputValidator>>), ApiError> {
    if request.grammar.is_some() {
        return Err(ApiError::InvalidRequest {
            message: "tools and grammar cannot be used together; send one".into(),
            param: Some("grammar"),
            code: "conflicting_constraints",
        });
    }
    let plain = constraint_spec(request)?;
    let schema = match &request.response_format {
        Some(ResponseFormat::JsonSchema { json_schema }) => json_schema.schema.clone(),
        Some(ResponseFormat::JsonObject) => Some(serde_json::json!({"type": "object"})),
        _ => None,
    };
    let validator = match &schema {
        Some(schema) => {
            Some(Arc::new(OutputValidator::new(schema).map_err(|refusal| ApiError::Refused { refusal, param: "response_format" })?))
        }
        None => None,
    };
    // Embedded beside the calls, the schema is held as tightly as it would be alone.
    let schema = schema
        .map(|s| crate::constraint::embedded_for_grammar(&s))
        .transpose()
        .map_err(|refusal| ApiError::Refused { refusal, param: "response_format" })?;
    // A model that thinks in its own channel (Harmony) may do so before it calls, unless asked not to.
    let think = request.reasoning_effort.as_deref() != Some("none");
    match grammar::lark(tools, schema.as_ref(), markers, think) {
        Some(lark) => Ok((Some((ConstraintSpec::Lark(lark), "tools")), validator)),
        None => Ok((plain, validator)),
    }
}

/// A constraint and the request field it came from (named in a refusal).
type Spec = (ConstraintSpec, &'static str);

fn constraint_spec(request: &ChatCompletionRequest) -> Result<Option<Spec>, ApiError> {
    let format = match &request.response_format {
        None | Some(ResponseFormat::Text) => None,
        Some(ResponseFormat::JsonObject) => Some(ConstraintSpec::JsonObject),
        Some(ResponseFormat::JsonSchema { json_schema }) => {
            let schema = json_schema
                .schema
                .clone()
                .ok_or_else(|| ApiError::invalid("response_format.json_schema.schema is required", "response_format"))?;
            Some(ConstraintSpec::JsonSchema(schema))
        }
    };
    match (format, &request.grammar) {
        (Some(_), Some(_)) => Err(ApiError::InvalidRequest {
            message: "response_format and grammar cannot be used together; send one".into(),
            param: Some("grammar"),
            code: "conflicting_constraints",
        }),
        (Some(spec), None) => Ok(Some((spec, "response_format"))),
        (None, Some(grammar)) => Ok(Some((ConstraintSpec::Gbnf(grammar.clone()), "grammar"))),
        (None, None) => Ok(None),
    }
}

fn tokenize(loaded: &Loaded, template: &ChatTemplate, prompt: &str) -> Vec<llama_cpp_2::token::LlamaToken> {
    let vocab = loaded.model.vocab();
    // Templates that write the BOS token themselves must not get a second one.
    let bos = template.bos_token();
    let add_bos = vocab.should_add_bos() && (bos.is_empty() || !prompt.starts_with(bos));
    vocab.tokenize(prompt.as_bytes(), add_bos, true)
}

fn max_tokens(request: &ChatCompletionRequest, prompt_len: usize, context: u32, default: u32) -> Result<u32, ApiError> {
    let prompt_len = u32::try_from(prompt_len).unwrap_or(u32::MAX);
    if prompt_len >= context {
        return Err(ApiError::ContextLengthExceeded {
            message: format!("this model's context window is {context} tokens, but the messages take {prompt_len}; shorten them"),
            param: "messages",
        });
    }
    let room = context - prompt_len;
    match request.requested_max_tokens() {
        None => Ok(default.min(room)),
        Some(asked) if asked < 1 => Err(ApiError::invalid("max_tokens must be at least 1", "max_tokens")),
        Some(asked) => {
            let asked_u32 = u32::try_from(asked).unwrap_or(u32::MAX);
            if asked_u32 > room {
                return Err(ApiError::ContextLengthExceeded {
                    message: format!(
                        "this model's context window is {context} tokens; the messages take {prompt_len} and max_tokens asks for {asked}, which leaves room for at most {room}"
                    ),
                    param: "max_tokens",
                });
            }
            Ok(asked_u32)
        }
    }
}
