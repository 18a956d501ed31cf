"""Tool calling with the official `openai` SDK: a round trip (call → tool result → answer), created and
streamed, with arguments that validate and a cost record for every round."""

import json

import openai

from conftest import psql

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def records(stack, request_id: str) -> int:
    return int(psql(stack.database_url, f"SELECT count(*) FROM cost_records WHERE request_id = '{request_id}'").strip())


def valid_arguments(arguments: str) -> dict:
    args = json.loads(arguments)
    assert set(args) == {"city", "unit"} and args["unit"] in ("celsius", "fahrenheit"), args
    return args


def test_tool_round_trip_create(stack, client, model):
    first = client.chat.completions.create(
        model=model, messages=QUESTION, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False, max_tokens=80
    )
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    valid_arguments(call.function.arguments)

    messages = QUESTION + [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "sunny"})},
    ]
    answer = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=40)
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert isinstance(answer.choices[0].message.content, str)
    assert records(stack, first.id) == 1 and records(stack, answer.id) == 1


def test_tool_round_trip_stream(stack, client, model):
    calls: dict[int, dict] = {}
    finish = None
    request_id = None
    stream = client.chat.completions.create(
        model=model, messages=QUESTION, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False,
        max_tokens=80, stream=True,
    )
    for chunk in stream:
        request_id = chunk.id
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
                if delta.id:
                    assert entry["id"] is None, "a call's id is sent once"
                    entry["id"] = delta.id
                if delta.function and delta.function.name:
                    entry["name"] = delta.function.name
                if delta.function and delta.function.arguments:
                    entry["arguments"] += delta.function.arguments
    assert finish == "tool_calls"
    assert calls and all(c["id"] and c["name"] == "get_weather" for c in calls.values())
    for c in calls.values():
        valid_arguments(c["arguments"])

    tool_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]
    messages = QUESTION + [{"role": "assistant", "content": None, "tool_calls": tool_calls}]
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "21 degrees"} for c in calls.values()]
    text = ""
    try:
        with client.chat.completions.stream(model=model, messages=messages, tools=[WEATHER], tool_choice="none", max_tokens=40) as answer:
            for event in answer:
                if event.type == "content.delta":
                    text += event.delta
            final = answer.get_final_completion()
    except openai.LengthFinishReasonError as cut:
        # The model samples, and some answers run to max_tokens: the SDK's stream helper then raises, with
        # the completion it assembled from the whole stream.
        final = cut.completion
        assert final.choices[0].finish_reason == "length"
    assert text == final.choices[0].message.content
    assert records(stack, request_id) == 1 and records(stack, final.id) == 1


def test_catalog_advertises_tools(client, model):
    listed = client.models.retrieve(model)
    assert listed.model_extra["supported_parameters"]["tools"] == {"type": "boolean"}
