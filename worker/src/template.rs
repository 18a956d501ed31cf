//! Rendering messages into a prompt with the model's own chat template (Jinja, from the GGUF metadata).

use llama_cpp_2::model::LlamaModel;
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::Serialize;

use crate::tools::markers::{Markers, Special};
use crate::tools::ToolFormat;

/// ChatML, used when a model ships no template of its own.
const FALLBACK_TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A message as templates expect it: role and plain-text content, and for tool-aware templates the calls
/// an assistant made (arguments as objects, as templates render them) and the call a tool result answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TemplateMessage {
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("the chat template rejected these messages: {0}")]
pub struct TemplateError(String);

#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// True when the model's own template mentions tools, i.e. it can render tool definitions.
    pub supports_tools: bool,
    /// How this template's model writes tool calls.
    pub tool_format: ToolFormat,
    /// Which of that format's markers are control tokens in the model's vocabulary.
    pub markers: Markers,
    /// False when the model had no template and ChatML stands in.
    pub from_model: bool,
    /// The template reads `enable_thinking` (Qwen3 and its kin): thinking can be switched off.
    pub thinking_switch: bool,
    /// The template reads `reasoning_effort` (gpt-oss's Harmony): it has effort levels.
    pub effort_levels: bool,
}

/// What the template is told about thinking; `None` leaves a variable undefined, so the template's own
/// default holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thinking {
    pub enable_thinking: Option<bool>,
    pub reasoning_effort: Option<String>,
}

impl ChatTemplate {
    /// The template in `file`, or else the model's own.
    ///
    /// # Errors
    /// When `file` cannot be read, or the template does not parse.
    pub fn load(model: &LlamaModel, file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        match file {
            Some(path) => {
                let source = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                Self::from_model_with(model, source)
            }
            None => Self::from_model(model),
        }
    }

    /// # Errors
    /// When the model's template does not parse as Jinja.
    pub fn from_model(model: &LlamaModel) -> anyhow::Result<Self> {
        Self::for_model(model, model.meta_val_str("tokenizer.chat_template").ok())
    }

    /// The model's tokens with another template's text.
    ///
    /// # Errors
    /// When `source` does not parse as Jinja.
    pub fn from_model_with(model: &LlamaModel, source: String) -> anyhow::Result<Self> {
        Self::for_model(model, Some(source))
    }

    fn for_model(model: &LlamaModel, source: Option<String>) -> anyhow::Result<Self> {
        let vocab = model.vocab();
        let piece = |t| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
        let mut template = Self::new(source, piece(vocab.bos()), piece(vocab.eos()))?;
        template.markers = Markers::resolve(template.tool_format, |marker| {
            // A control token: one token for the marker's text, written as nothing unless asked for.
            match vocab.tokenize(marker.as_bytes(), false, true).as_slice() {
                [token] if vocab.token_to_piece(*token, false, None).is_empty() => {
                    Some(Special { id: u32::try_from(token.0).ok()?, ends: vocab.is_eog(*token) })
                }
                _ => None,
            }
        });
        Ok(template)
    }

    /// # Errors
    /// When `source` does not parse as Jinja.
    pub fn new(source: Option<String>, bos_token: String, eos_token: String) -> anyhow::Result<Self> {
        let from_model = source.is_some();
        let source = source.unwrap_or_else(|| FALLBACK_TEMPLATE.to_owned());
        let supports_tools = from_model && source.contains("tools");
        let tool_format = if from_model { ToolFormat::detect(&source) } else { ToolFormat::Generic };
        let thinking_switch = source.contains("enable_thinking");
        let effort_levels = source.contains("reasoning_effort");
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message))
        });
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", source).map_err(|e| anyhow::anyhow!("the model's chat template does not parse: {e}"))?;
        let markers = Markers::text();
        Ok(Self { env, bos_token, eos_token, supports_tools, tool_format, markers, from_model, thinking_switch, effort_levels })
    }

    /// The model's BOS token as text (empty when it has none).
    #[must_use]
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// # Errors
    /// When the template raises (for example on roles it does not allow).
    pub fn render(
        &self,
        messages: &[TemplateMessage],
        tools: Option<&[serde_json::Value]>,
        thinking: &Thinking,
    ) -> Result<String, TemplateError> {
        let template = self.env.get_template("chat").map_err(|e| TemplateError(e.to_string()))?;
        // An undefined variable, not `none`, where the request says nothing: templates test `is defined`.
        let mut ctx = context! {
            messages => messages,
            tools => tools,
            add_generation_prompt => true,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        };
        if let Some(enable) = thinking.enable_thinking {
            ctx = context! { enable_thinking => enable, ..ctx };
        }
        if let Some(effort) = &thinking.reasoning_effort {
            ctx = context! { reasoning_effort => effort, ..ctx };
        }
        template.render(ctx).map_err(|e| TemplateError(e.to_string()))
    }
}

/// Today's date (UTC) in a strftime format, as Hugging Face's chat templates are given it.
fn strftime_now(format: String) -> Result<String, JinjaError> {
    use chrono::format::{Item, StrftimeItems};
    let items: Vec<Item<'_>> = StrftimeItems::new(&format).collect();
    if items.contains(&Item::Error) {
        return Err(JinjaError::new(ErrorKind::InvalidOperation, format!("strftime_now: `{format}` is not a strftime format")));
    }
    Ok(chrono::Utc::now().format_with_items(items.into_iter()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> TemplateMessage {
        TemplateMessage { role: role.into(), content: content.into(), ..Default::default() }
    }

    #[test]
    fn fallback_is_chatml() {
        let t = ChatTemplate::new(None, String::new(), String::new()).expect("fallback parses");
        let out = t.render(&[msg("user", "hi")], None, &Thinking::default()).expect("renders");
        assert_eq!(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
        assert!(!t.supports_tools);
    }

    #[test]
    fn raise_exception_becomes_an_error() {
        let src = "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok";
        let t = ChatTemplate::new(Some(src.into()), String::new(), String::new()).expect("parses");
        assert!(t.render(&[msg("assistant", "x")], None, &Thinking::default()).is_err());
        assert_eq!(t.render(&[msg("user", "x")], None, &Thinking::default()).expect("renders"), "ok");
    }

    #[test]
    fn thinking_variables_reach_the_template_only_when_set() {
        let src = "{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on{% endif %}:{{ reasoning_effort | default('unset') }}";
        let t = ChatTemplate::new(Some(src.into()), String::new(), String::new()).expect("parses");
        assert!(t.thinking_switch && t.effort_levels);
        let render = |thinking: &Thinking| t.render(&[msg("user", "x")], None, thinking).expect("renders");
        assert_eq!(render(&Thinking::default()), "on:unset");
        assert_eq!(render(&Thinking { enable_thinking: Some(false), reasoning_effort: Some("low".into()) }), "off:low");
        assert!(!ChatTemplate::new(None, String::new(), String::new()).expect("fallback").thinking_switch);
    }

    #[test]
    fn strftime_now_writes_today_and_refuses_a_bad_format() {
        let t = ChatTemplate::new(Some("{{ strftime_now('%Y-%m-%d') }}".into()), String::new(), String::new()).expect("parses");
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        assert_eq!(t.render(&[msg("user", "x")], None, &Thinking::default()).expect("renders"), today);
        let bad = ChatTemplate::new(Some("{{ strftime_now('%Q') }}".into()), String::new(), String::new()).expect("parses");
        assert!(bad.render(&[msg("user", "x")], None, &Thinking::default()).is_err());
    }

    #[test]
    fn python_string_methods_work() {
        let src = "{{ messages[0].content.strip() }}";
        let t = ChatTemplate::new(Some(src.into()), String::new(), String::new()).expect("parses");
        assert_eq!(t.render(&[msg("user", "  x  ")], None, &Thinking::default()).expect("renders"), "x");
    }
}
