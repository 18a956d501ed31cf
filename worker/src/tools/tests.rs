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

    let eager = grammar::lark(&named, None).unwrap();
    assert!(eager.starts_with("start: \"<tool_call>\""), "{eager}");
    // The call's arguments are closed (the tool's schema leaves `additionalProperties` open): the model
    // cannot add keys the tool does not declare.
    let call_json = eager.lines().find_map(|l| l.strip_prefix("call_json: %json ")).unwrap();
    let call: Value = serde_json::from_str(call_json).unwrap();
    assert_eq!(call["properties"]["arguments"]["additionalProperties"], json!(false), "{call}");
    assert_eq!(named.tools[0].parameters.get("additionalProperties"), None, "the tool as declared is unchanged");
    let lazy = grammar::lark(&request(None, ToolFormat::Hermes), None).unwrap();
    assert!(lazy.starts_with("start: FREE | PREFIX"), "{lazy}");
    assert!(grammar::lark(&request(Some(json!("none")), ToolFormat::Hermes), None).is_none());
    let generic = grammar::lark(&request(Some(json!("required")), ToolFormat::Generic), None).unwrap();
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
    let with_answer = grammar::lark(&request(None, ToolFormat::Hermes), Some(&json!({"type": "object"}))).unwrap();
    for grammar in [&eager, &generic, &with_answer] {
        let embedded = grammar.matches("%json").count();
        assert!(embedded > 0, "{grammar}");
        assert_eq!(grammar.matches("\"whitespace_flexible\":false").count(), embedded, "{grammar}");
    }
}
