"""Stored responses, function tools and background mode on the Responses API, with the official `openai`
Python SDK: a three-turn conversation through `previous_response_id` (the earlier turns read from the
worker's cache), retrieve and delete, a function-tool round trip (whole and streamed), a background
response polled to completion, one streamed and resumed with `starting_after`, and one cancelled, and log
probabilities refused by name on chat and Responses."""

from __future__ import annotations

import json
import time

import openai
import pytest

from conftest import psql
from test_openai_chat import assert_cost

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "strict": True,
}


def cost_record_status(stack, request_id: str) -> str:
    return psql(stack.database_url, f"SELECT status FROM cost_records WHERE request_id = '{request_id}'").strip()


def test_three_turn_conversation_reads_earlier_turns_from_cache(client, model):
    first = client.responses.create(model=model, input="My name is Ada. Say hello.", max_output_tokens=16, temperature=0)
    assert first.store is True and first.status in ("completed", "incomplete")
    second = client.responses.create(
        model=model, previous_response_id=first.id, input="What is my name?", max_output_tokens=16, temperature=0
    )
    third = client.responses.create(
        model=model, previous_response_id=second.id, input="Say it once more.", max_output_tokens=16, temperature=0
    )
    assert second.previous_response_id == first.id and third.previous_response_id == second.id
    # Each turn reads the whole conversation so far; the earlier turns come from the worker's cache.
    assert second.usage.input_tokens > first.usage.input_tokens
    assert third.usage.input_tokens > second.usage.input_tokens
    assert second.usage.input_tokens_details.cached_tokens > 0
    assert third.usage.input_tokens_details.cached_tokens >= second.usage.input_tokens
    for turn in (first, second, third):
        assert_cost(turn.usage)
    items = client.responses.input_items.list(third.id)
    assert [item.content[0].text for item in items.data] == ["Say it once more."]


def test_retrieve_and_delete(client, model):
    created = client.responses.create(model=model, input="Say hi.", max_output_tokens=8, temperature=0)
    kept = client.responses.retrieve(created.id)
    assert kept.id == created.id and kept.output_text == created.output_text
    assert kept.usage.total_tokens == created.usage.total_tokens
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    with pytest.raises(openai.BadRequestError) as gone:
        client.responses.create(model=model, previous_response_id=created.id, input="Hi", max_output_tokens=8)
    assert gone.value.code == "previous_response_not_found"
    unstored = client.responses.create(model=model, input="Say hi.", max_output_tokens=8, store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_function_tool_round_trip_whole(stack, client, model):
    first = client.responses.create(
        model=model,
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=80,
        temperature=0,
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1, first.output
    call = calls[0]
    assert call.name == "get_weather" and call.call_id
    args = json.loads(call.arguments)
    assert set(args) == {"city", "unit"} and args["unit"] in ("celsius", "fahrenheit"), args
    answer = client.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temperature": 21})}],
        tools=[WEATHER],
        tool_choice="none",
        max_output_tokens=24,
        temperature=0,
    )
    assert answer.output[0].type == "message" and isinstance(answer.output_text, str)
    assert cost_record_status(stack, first.id) == "succeeded"
    assert cost_record_status(stack, answer.id) == "succeeded"


def test_function_tool_round_trip_streamed(client, model):
    deltas = []
    with client.responses.stream(
        model=model,
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=80,
        temperature=0,
    ) as stream:
        kinds = []
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.function_call_arguments.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds
    call = next(item for item in final.output if item.type == "function_call")
    assert "".join(deltas) == call.arguments
    json.loads(call.arguments)
    # The call's result, sent back with the call itself rather than through the store.
    answer = client.responses.create(
        model=model,
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "21 degrees, sunny"},
        ],
        tools=[WEATHER],
        tool_choice="none",
        store=False,
        max_output_tokens=24,
    )
    assert answer.output[0].type == "message"


def poll(client, response_id: str, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        assert time.monotonic() < deadline, response
        time.sleep(0.1)


def test_background_polled_to_completion(stack, client, model):
    queued = client.responses.create(model=model, input="Say hi.", max_output_tokens=16, background=True)
    assert queued.status == "queued" and queued.background is True
    done = poll(client, queued.id)
    assert done.status in ("completed", "incomplete")
    assert_cost(done.usage)
    assert cost_record_status(stack, queued.id) == "succeeded"


def test_background_cancelled(stack, client, model):
    queued = client.responses.create(
        model=model,
        input="List numbers.",
        max_output_tokens=400,
        background=True,
        text={"format": {"type": "json_schema", "name": "numbers", "schema": {"type": "array", "items": {"type": "integer"}, "minItems": 200}}},
    )
    deadline = time.monotonic() + 60
    while client.responses.retrieve(queued.id).status == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cancelled = client.responses.cancel(queued.id)
    assert cancelled.status == "cancelled"
    deadline = time.monotonic() + 30
    while cost_record_status(stack, queued.id) == "":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert cost_record_status(stack, queued.id) == "cancelled"
    assert client.responses.retrieve(queued.id).status == "cancelled"


def test_background_streamed_then_resumed(stack, client, model):
    stream = client.responses.create(
        model=model, input="Count from one to twenty.", max_output_tokens=48, temperature=0, background=True, stream=True
    )
    first = []
    for event in stream:
        first.append(event)
        if len(first) == 4:
            break  # the connection drops
    stream.close()
    created = first[0]
    assert created.type == "response.created" and created.response.status == "queued" and created.response.background is True
    assert [e.sequence_number for e in first] == [0, 1, 2, 3]
    response_id = created.response.id
    resumed = list(client.responses.retrieve(response_id, stream=True, starting_after=first[-1].sequence_number))
    assert [e.sequence_number for e in resumed] == list(range(4, 4 + len(resumed)))
    final = resumed[-1]
    assert final.type in ("response.completed", "response.incomplete"), final.type
    text = "".join(e.delta for e in first + resumed if e.type == "response.output_text.delta")
    assert final.response.output_text == text
    assert_cost(final.response.usage)
    # The whole stream again, from the first event: the same events.
    replayed = list(client.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in replayed] == [e.model_dump() for e in first + resumed]
    stored = client.responses.retrieve(response_id)
    assert stored.status == final.response.status and stored.output_text == text
    assert cost_record_status(stack, response_id) == "succeeded"
    # Only a background response streams from GET.
    online = client.responses.create(model=model, input="Say hi.", max_output_tokens=8)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.retrieve(online.id, stream=True)
    assert refused.value.param == "stream"
