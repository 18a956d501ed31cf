//! Template-level tests of the Hermes format against a Qwen-style chat template, and of reading calls.

use serde_json::{json, Value};

use super::parse::{parse, Piece, Splitter};
use super::{grammar, Choice, ToolFormat, ToolRequest};
use crate::template::{ChatTemplate, TemplateMessage};

const QWEN_STYLE: &str = include_str!("../../tests/data/hermes-template.jinja");

fn weather_tools() -> Vec<Value> {
    vec![json!({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})]
}

fn request(choice: Option<Value>, format: ToolFormat) -> ToolRequest {
    ToolRequest::from_request(Some(&weather_tools()), choice.as_ref(), None, format).unwrap().unwrap()
}

#[test]
fn qwen_style_templates_are_hermes_and_others_generic() {
    assert_eq!(ToolFormat::detect(QWEN_STYLE), ToolFormat::Hermes);
    let chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
    assert_eq!(ToolFormat::detect(chatml), ToolFormat::Generic);
}

#[test]
fn hermes_template_renders_tools_calls_and_results() {
    let template = ChatTemplate::new(Some(QWEN_STYLE.into()), String::new(), String::new()).unwrap();
    assert_eq!(template.tool_format, ToolFormat::Hermes);
    let tools = request(None, ToolFormat::Hermes);
    let messages = vec![
        TemplateMessage { role: "user".into(), content: "Weather in Paris?".into(), ..Default::default() },
        TemplateMessage {
            role: "assistant".into(),
            content: String::new(),
            tool_calls: Some(vec![
                json!({"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
            ]),
            ..Default::default()
        },
        TemplateMessage {
            role: "tool".into(),
            content: "{\"temp_c\": 21}".into(),
            tool_call_id: Some("call_1".into()),
            ..Default::default()
        },
    ];
    let out = template.render(&messages, Some(&tools.openai_json()), &crate::template::Thinking::default()).unwrap();
    assert!(out.contains("<tools>\n{\"function\":{\"description\":\"Weather in a city\",\"name\":\"get_weather\""), "{out}");
    assert!(out.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"), "{out}");
    assert!(out.contains("<tool_response>\n{\"temp_c\": 21}\n</tool_response>"), "{out}");
    assert!(out.ends_with("<|im_start|>assistant\n"));
}

#[test]
fn hermes_answers_parse_into_text_and_checked_calls() {
    let tools = request(None, ToolFormat::Hermes);
    let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    let parsed = parse(&tools, text).unwrap();
    assert_eq!(parsed.content.as_deref(), Some("Let me look."));
    assert_eq!(parsed.calls.len(), 2);
    assert_eq!(parsed.calls[1].arguments, "{\"city\":\"Oslo\"}");
    assert_eq!(parse(&tools, "Just text.").unwrap().calls.len(), 0);
    let bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": 1}}\n</tool_call>";
    assert!(parse(&tools, bad).is_err(), "arguments must match the tool's schema");
    let unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
    assert!(parse(&tools, unknown).is_err());
}

#[test]
fn streamed_hermes_text_flows_and_calls_arrive_whole() {
    let tools = request(None, ToolFormat::Hermes);
    let text = "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let mut splitter = Splitter::new(ToolFormat::Hermes);
    let mut pieces = Vec::new();
    for c in text.chars() {
        pieces.extend(splitter.push(&tools, &c.to_string()).unwrap());
    }
    pieces.extend(splitter.finish(&tools).unwrap());
    let content: String = pieces.iter().filter_map(|p| if let Piece::Content(t) = p { Some(t.as_str()) } else { None }).collect();
    assert_eq!(content, "Sure.");
    let calls: Vec<_> = pieces.iter().filter(|p| matches!(p, Piece::Call(_))).collect();
    assert_eq!(calls.len(), 1);
    // Text that only looks like the start of the trigger is released once it is not.
    let mut splitter = Splitter::new(ToolFormat::Hermes);
    let mut out = splitter.push(&tools, "a <tool").unwrap();
    out.extend(splitter.push(&tools, "box> b").unwrap());
    out.extend(splitter.finish(&tools).unwrap());
    let content: String = out.iter().filter_map(|p| if let Piece::Content(t) = p { Some(t.as_str()) } else { None }).collect();
    assert_eq!(content, "a <toolbox> b");
}

#[test]
fn choices_are_checked_and_shape_the_grammar() {
    let named = request(Some(json!({"type": "function", "function": {"name": "get_weather"}})), ToolFormat::Hermes);
    assert_eq!(named.choice, Choice::Named("get_weather".into()));
    // Clients that leave out `type` (it can only be `function`) name the tool all the same; another type
    // is refused.
    let untyped = request(Some(json!({"function": {"name": "get_weather"}})), ToolFormat::Hermes);
    assert_eq!(untyped.choice, Choice::Named("get_weather".into()));
    let other_type = json!({"type": "retrieval", "function": {"name": "get_weather"}});
    assert!(ToolRequest::from_request(Some(&weather_tools()), Some(&other_type), None, ToolFormat::Hermes).is_err());
    let unknown = json!({"type": "function", "function": {"name": "nope"}});
    assert!(ToolRequest::from_request(Some(&weather_tools()), Some(&unknown), None, ToolFormat::Hermes).is_err());
    assert!(ToolRequest::from_request(
        Some(&[json!({"type": "function", "function": {"name": "bad name"}})]),
        None,
        None,
        ToolFormat::Hermes
    )
    .is_err());
    assert!(ToolRequest::from_request(
        Some(&[json!({"type": "function", "function": {"name": "f", "parameters": {"type": 7}}})]),
        None,
        None,
        ToolFormat::Hermes
    )
    .is_err());

    let eager = grammar::lark(&named, None, &super::markers::Markers::text(), false).unwrap();
    assert!(eager.starts_with("start: \"<tool_call>\""), "{eager}");
    // The call's arguments are closed (the tool's schema leaves `additionalProperties` open): the model
    // cannot add keys the tool does not declare.
    let call_json = eager.lines().find_map(|l| l.strip_prefix("call_json: %json ")).unwrap();
    let call: Value = serde_json::from_str(call_json).unwrap();
    assert_eq!(call["properties"]["arguments"]["additionalProperties"], json!(false), "{call}");
    assert_eq!(named.tools[0].parameters.get("additionalProperties"), None, "the tool as declared is unchanged");
    let lazy = grammar::lark(&request(None, ToolFormat::Hermes), None, &super::markers::Markers::text(), false).unwrap();
    assert!(lazy.starts_with("start: FREE | PREFIX"), "{lazy}");
    assert!(grammar::lark(&request(Some(json!("none")), ToolFormat::Hermes), None, &super::markers::Markers::text(), false).is_none());
    let generic =
        grammar::lark(&request(Some(json!("required")), ToolFormat::Generic), None, &super::markers::Markers::text(), false).unwrap();
    assert!(generic.contains("\"tool_calls\"") && !generic.contains("\"response\""), "{generic}");

    // Answers that are JSON from the first token get the guards JSON answers get; free text does not.
    assert!(named.answers_in_json(false));
    assert!(request(Some(json!("required")), ToolFormat::Generic).answers_in_json(false));
    assert!(request(None, ToolFormat::Generic).answers_in_json(false));
    assert!(!request(None, ToolFormat::Hermes).answers_in_json(false));
    assert!(request(None, ToolFormat::Hermes).answers_in_json(true));
    assert!(!request(Some(json!("none")), ToolFormat::Generic).answers_in_json(false));

    // Every embedded JSON is held to compact separators: whitespace between tokens let a call loop on
    // newlines until max_tokens.
    let with_answer =
        grammar::lark(&request(None, ToolFormat::Hermes), Some(&json!({"type": "object"})), &super::markers::Markers::text(), false)
            .unwrap();
    for grammar in [&eager, &generic, &with_answer] {
        let embedded = grammar.matches("%json").count();
        assert!(embedded > 0, "{grammar}");
        assert_eq!(grammar.matches("\"whitespace_flexible\":false").count(), embedded, "{grammar}");
    }
}

/// The real chat templates of each family (`tests/data/README.md` says where they come from).
const LLAMA_3_2: &str = include_str!("../../tests/data/llama-3.2-template.jinja");
const MISTRAL_NEMO: &str = include_str!("../../tests/data/mistral-nemo-template.jinja");
const MISTRAL_SMALL_3_2: &str = include_str!("../../tests/data/mistral-small-3.2-template.jinja");
const GPT_OSS: &str = include_str!("../../tests/data/gpt-oss-template.jinja");

#[test]
fn each_family_template_is_read_as_its_own_format() {
    assert_eq!(ToolFormat::detect(LLAMA_3_2), ToolFormat::Llama3);
    assert_eq!(ToolFormat::detect(MISTRAL_NEMO), ToolFormat::Mistral);
    assert_eq!(ToolFormat::detect(MISTRAL_SMALL_3_2), ToolFormat::MistralArgs);
    assert_eq!(ToolFormat::detect(GPT_OSS), ToolFormat::Harmony);
}

fn contents(pieces: &[Piece]) -> String {
    pieces.iter().filter_map(|p| if let Piece::Content(t) = p { Some(t.as_str()) } else { None }).collect()
}

fn calls(pieces: &[Piece]) -> Vec<&super::parse::Call> {
    pieces.iter().filter_map(|p| if let Piece::Call(c) = p { Some(c) } else { None }).collect()
}

/// Streams `text` a character at a time and returns everything the splitter yields.
fn stream(tools: &ToolRequest, text: &str, cut: bool) -> Vec<Piece> {
    let mut splitter = Splitter::new(tools.format);
    let mut out = Vec::new();
    for c in text.chars() {
        out.extend(splitter.push(tools, &c.to_string()).unwrap());
    }
    out.extend(if cut { splitter.cut() } else { splitter.finish(tools).unwrap() });
    out
}

/// Each family's own call syntax, as its models write it: read whole and streamed alike.
#[test]
fn each_familys_call_syntax_is_read_whole_and_streamed() {
    let cases = [
        (ToolFormat::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", 1),
        (ToolFormat::Mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1B2c3D4e\"}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"f5G6h7I8j\"}]", 2),
        (ToolFormat::MistralArgs, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Oslo\"}", 2),
        // Recipient after the channel (OpenAI's own examples) and in the role header (as the template
        // renders past calls), after thinking in the analysis channel.
        (ToolFormat::Harmony, "<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>", 1),
        (ToolFormat::Harmony, " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}", 1),
    ];
    for (format, text, count) in cases {
        let tools = request(None, format);
        let parsed = parse(&tools, text).unwrap_or_else(|e| panic!("{format:?}: {e:?}"));
        assert_eq!(parsed.calls.len(), count, "{format:?}: {parsed:?}");
        assert_eq!(parsed.calls[0].name, "get_weather");
        assert_eq!(parsed.calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(parsed.content, None, "{format:?}");
        let streamed = stream(&tools, text, false);
        assert_eq!(calls(&streamed), parsed.calls.iter().collect::<Vec<_>>(), "{format:?}");
        assert_eq!(contents(&streamed), "", "{format:?}: a call is not text");
    }
}

#[test]
fn each_familys_text_answer_is_the_content_and_bad_calls_are_caught() {
    let cases = [
        (ToolFormat::Llama3, "It is sunny in Paris.", "It is sunny in Paris."),
        (ToolFormat::Mistral, "It is sunny [really].", "It is sunny [really]."),
        (ToolFormat::MistralArgs, "It is sunny.", "It is sunny."),
        (
            ToolFormat::Harmony,
            "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
            "It is sunny.",
        ),
        // A model that writes no channels at all is read as it wrote.
        (ToolFormat::Harmony, "It is sunny.", "It is sunny."),
    ];
    for (format, text, content) in cases {
        let tools = request(None, format);
        let parsed = parse(&tools, text).unwrap();
        assert!(parsed.calls.is_empty(), "{format:?}");
        assert_eq!(parsed.content.as_deref(), Some(content), "{format:?}");
        let streamed = stream(&tools, text, false);
        assert_eq!(contents(&streamed), content, "{format:?}");
        assert!(calls(&streamed).is_empty());
    }
    // Harmony's thinking never reaches the client, even when the answer is cut inside it.
    let tools = request(None, ToolFormat::Harmony);
    assert_eq!(contents(&stream(&tools, "<|channel|>analysis<|message|>Thinking about it", true)), "");
    let cut = stream(&tools, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Sun<|e", true);
    assert_eq!(contents(&cut), "Sun<|e", "a cut answer keeps what it wrote");
    assert_eq!(contents(&stream(&tools, "Plain words, cut", true)), "Plain words, cut");
    // A JSON object that is not a call is a Llama 3 answer (a `response_format` schema's), not a call.
    let llama = request(None, ToolFormat::Llama3);
    assert_eq!(parse(&llama, "{\"answer\": \"sunny\"}").unwrap().content.as_deref(), Some("{\"answer\": \"sunny\"}"));
    for (format, bad) in [
        (ToolFormat::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"town\": 1}}"),
        (ToolFormat::Mistral, "[TOOL_CALLS][{\"name\": \"rm_rf\", \"arguments\": {}}]"),
        (ToolFormat::MistralArgs, "[TOOL_CALLS]get_weather[ARGS]{\"city\": 5}"),
        (ToolFormat::Harmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": 5}"),
    ] {
        assert!(parse(&request(None, format), bad).is_err(), "{format:?}: {bad}");
    }
}

/// Markers that are control tokens are asked for by token; in any other vocabulary they are text.
#[test]
fn family_grammars_ask_for_their_markers_and_the_tools_schemas() {
    use super::markers::{Markers, Special};
    let text = Markers::text();
    let named = Some(json!({"type": "function", "function": {"name": "get_weather"}}));
    for format in [ToolFormat::Llama3, ToolFormat::Mistral, ToolFormat::MistralArgs, ToolFormat::Harmony] {
        let eager = grammar::lark(&request(named.clone(), format), None, &text, false).unwrap();
        assert!(eager.contains("\"additionalProperties\":false"), "{format:?}: arguments closed: {eager}");
        assert!(eager.contains("get_weather"), "{eager}");
        let lazy = grammar::lark(&request(None, format), None, &text, true).unwrap();
        assert!(lazy.contains("FREE"), "{format:?}: auto may answer in text: {lazy}");
        let with_answer = grammar::lark(&request(None, format), Some(&json!({"type": "object"})), &text, false).unwrap();
        assert!(!with_answer.contains("FREE"), "{format:?}: with a schema the answer is JSON: {with_answer}");
    }
    let harmony = grammar::lark(&request(named.clone(), ToolFormat::Harmony), None, &text, false).unwrap();
    assert!(harmony.starts_with("start: call\n"), "no thinking when asked for none: {harmony}");
    assert!(harmony.contains("\"commentary to=functions.get_weather \""), "{harmony}");
    let thinking = grammar::lark(&request(named, ToolFormat::Harmony), None, &text, true).unwrap();
    assert!(thinking.starts_with("start: analysis? (call)"), "{thinking}");
    let gpt_oss = Markers::resolve(ToolFormat::Harmony, |m| match m {
        "<|channel|>" => Some(Special { id: 200_005, ends: false }),
        "<|call|>" => Some(Special { id: 200_012, ends: true }),
        _ => None,
    });
    let tokens = grammar::lark(&request(None, ToolFormat::Harmony), None, &gpt_oss, true).unwrap();
    assert!(tokens.contains("<[200005]> \"final\""), "{tokens}");
    assert!(!tokens.contains("<|call|>") && !tokens.contains("<|channel|>"), "{tokens}");
}
