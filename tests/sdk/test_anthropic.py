"""The official `anthropic` SDK against /v1/messages: create, stream, tools (a round trip, both ways),
structured output and errors. Run with the 2.x line and, in its own venv, the 0.x line."""

import json

import anthropic
import pytest

from conftest import psql

WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def claude(stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.base_url, api_key=stack.api_key, max_retries=0, timeout=300.0)


def recorded(stack, message_id: str) -> bool:
    return psql(stack.database_url, f"SELECT status FROM cost_records WHERE request_id = '{message_id}'").strip() == "succeeded"


def valid_input(value: dict) -> None:
    assert set(value) == {"city", "unit"} and value["unit"] in ("celsius", "fahrenheit"), value


def test_create(stack, claude, model):
    message = claude.messages.create(model=model, max_tokens=30, system="Be brief.", messages=[{"role": "user", "content": "Say hi."}])
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text" and isinstance(message.content[0].text, str)
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert recorded(stack, message.id)


def test_bearer_auth_works_too(stack, model):
    client = anthropic.Anthropic(base_url=stack.base_url, auth_token=stack.api_key, max_retries=0)
    message = client.messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": "Hi"}])
    assert message.usage.output_tokens > 0


def test_stream(stack, claude, model):
    with claude.messages.stream(model=model, max_tokens=30, messages=[{"role": "user", "content": "Count to five."}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.input_tokens > 0
    assert recorded(stack, final.id)


def test_tool_round_trip(stack, claude, model):
    first = claude.messages.create(model=model, max_tokens=80, messages=QUESTION, tools=[WEATHER], tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b.type == "tool_use"]
    assert uses and all(u.name == "get_weather" for u in uses)
    for use in uses:
        valid_input(use.input)
    messages = QUESTION + [
        {"role": "assistant", "content": [u.model_dump() for u in uses]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "21 degrees, sunny"} for u in uses]},
    ]
    answer = claude.messages.create(model=model, max_tokens=40, messages=messages, tools=[WEATHER], tool_choice={"type": "none"})
    assert answer.stop_reason in ("end_turn", "max_tokens")
    assert answer.content[0].type == "text"
    assert recorded(stack, first.id) and recorded(stack, answer.id)


def test_streamed_tool_use(stack, claude, model):
    with claude.messages.stream(
        model=model, max_tokens=80, messages=QUESTION, tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    uses = [b for b in final.content if b.type == "tool_use"]
    assert uses
    for use in uses:
        valid_input(use.input)
    assert recorded(stack, final.id)


def test_structured_output(stack, claude, model):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"], "additionalProperties": False}
    message = claude.messages.create(
        model=model,
        max_tokens=60,
        messages=[{"role": "user", "content": "Name a city."}],
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    assert len(message.content) == 1
    assert set(json.loads(message.content[0].text)) == {"city"}


def test_errors_raise_the_sdk_exceptions(stack, model):
    bad_key = anthropic.Anthropic(base_url=stack.base_url, api_key="rk-000000000000-nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad_key.messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": "Hi"}])
    claude = anthropic.Anthropic(base_url=stack.base_url, api_key=stack.api_key, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude.messages.create(model="no-such-model", max_tokens=5, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.body["error"]["type"] == "not_found_error"
