//! Thinking for this request: off for a constrained answer, `reasoning_effort` honoured where the chat
//! template can act on it, refused where it cannot.
//!
//! A grammar holds from the first token of the answer, so a constrained answer has no room to think in:
//! templates with a switch (`enable_thinking`) get it off, which also keeps the template from opening a
//! `<think>` block the grammar would then forbid closing.

use runaii_wire::ChatCompletionRequest;

use crate::error::ApiError;
use crate::template::{ChatTemplate, Thinking};

/// The levels OpenAI defines for `reasoning_effort`.
const LEVELS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

/// What the template is told. `constrained`: the answer is held to a schema or grammar from its first token.
pub(super) fn thinking(request: &ChatCompletionRequest, template: &ChatTemplate, constrained: bool) -> Result<Thinking, ApiError> {
    let effort = request.reasoning_effort.as_deref();
    if let Some(level) = effort.filter(|l| !LEVELS.contains(l)) {
        return Err(ApiError::invalid(
            format!("reasoning_effort `{level}` is not one of none, minimal, low, medium, high, xhigh"),
            "reasoning_effort",
        ));
    }
    let wants_thinking = effort.is_some_and(|level| level != "none");
    if constrained {
        if wants_thinking {
            return Err(unsupported(
                "a constrained answer (response_format json_schema or json_object, or grammar) is written without thinking: \
                 its grammar holds from the first token. Leave reasoning_effort out or send `none`",
            ));
        }
        return Ok(Thinking { enable_thinking: Some(false), reasoning_effort: None });
    }
    let Some(level) = effort else { return Ok(Thinking::default()) };
    if template.effort_levels {
        let enable_thinking = (template.thinking_switch && !wants_thinking).then_some(false);
        return Ok(Thinking { enable_thinking, reasoning_effort: Some(level.to_owned()) });
    }
    if template.thinking_switch {
        // A switch has no levels: every level but `none` turns thinking on.
        return Ok(Thinking { enable_thinking: Some(wants_thinking), reasoning_effort: None });
    }
    if wants_thinking {
        return Err(unsupported(&format!(
            "this model's chat template has no thinking switch or effort levels, so reasoning_effort `{level}` cannot be \
             honoured; leave it out or send `none`"
        )));
    }
    Ok(Thinking::default())
}

fn unsupported(message: &str) -> ApiError {
    ApiError::InvalidRequest { message: message.to_owned(), param: Some("reasoning_effort"), code: "reasoning_unsupported" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(source: Option<&str>) -> ChatTemplate {
        ChatTemplate::new(source.map(str::to_owned), String::new(), String::new()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn request(effort: Option<&str>) -> ChatCompletionRequest {
        ChatCompletionRequest { reasoning_effort: effort.map(str::to_owned), ..ChatCompletionRequest::default() }
    }

    fn refused(outcome: Result<Thinking, ApiError>) -> bool {
        matches!(outcome, Err(ApiError::InvalidRequest { param: Some("reasoning_effort"), .. }))
    }

    #[test]
    fn constrained_answers_turn_thinking_off_and_refuse_effort() {
        let qwen = template(Some("{{ enable_thinking }}"));
        let off = Thinking { enable_thinking: Some(false), reasoning_effort: None };
        assert_eq!(thinking(&request(None), &qwen, true).ok(), Some(off.clone()));
        assert_eq!(thinking(&request(Some("none")), &qwen, true).ok(), Some(off));
        assert!(refused(thinking(&request(Some("high")), &qwen, true)));
    }

    #[test]
    fn effort_is_honoured_where_the_template_can_and_refused_where_not() {
        let switch = template(Some("{{ enable_thinking }}"));
        assert_eq!(thinking(&request(Some("low")), &switch, false).ok().and_then(|t| t.enable_thinking), Some(true));
        assert_eq!(thinking(&request(Some("none")), &switch, false).ok().and_then(|t| t.enable_thinking), Some(false));
        assert_eq!(thinking(&request(None), &switch, false).ok(), Some(Thinking::default()), "the template's default");

        let levels = template(Some("{{ reasoning_effort }}"));
        assert_eq!(thinking(&request(Some("high")), &levels, false).ok().and_then(|t| t.reasoning_effort).as_deref(), Some("high"));

        let plain = template(None);
        assert!(refused(thinking(&request(Some("medium")), &plain, false)));
        assert_eq!(thinking(&request(Some("none")), &plain, false).ok(), Some(Thinking::default()));
        assert!(refused(thinking(&request(Some("extreme")), &switch, false)), "unknown level");
    }
}
