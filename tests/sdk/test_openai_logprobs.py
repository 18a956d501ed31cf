"""Log probabilities through the gateway with the official `openai` Python SDK: chat (whole, streamed,
under a JSON Schema) and Responses (`include: ["message.output_text.logprobs"]`, whole and streamed)."""

from __future__ import annotations

import json
import math

import openai
import pytest

from test_openai_chat import assert_cost

COLOR_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "color",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
            "required": ["color"],
            "additionalProperties": False,
        },
    },
}


def assert_same_tokens(a, b) -> None:
    """Two answers' entries: the same tokens, with log probabilities equal up to float noise (two requests
    may be decoded in batches of other sizes)."""
    assert [t.token for t in a] == [t.token for t in b]
    assert all(abs(x.logprob - y.logprob) < 1e-3 for x, y in zip(a, b))


def assert_tokens(tokens, text: str, top: int) -> None:
    """The SDK's typed entries: the tokens' bytes spell `text`, each lists `top` alternatives, most likely
    first, whose probabilities sum to at most 1."""
    assert b"".join(bytes(t.bytes) for t in tokens) == text.encode()
    for t in tokens:
        assert t.logprob <= 0 and t.token == bytes(t.bytes).decode(errors="replace")
        assert len(t.top_logprobs) == top
        values = [alt.logprob for alt in t.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert sum(math.exp(v) for v in values) <= 1 + 1e-4
        if values:
            assert t.logprob <= values[0] + 1e-6


def test_chat_logprobs_whole(client, model):
    resp = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Name three fruits."}],
        temperature=0,
        max_completion_tokens=12,
        logprobs=True,
        top_logprobs=3,
    )
    choice = resp.choices[0]
    assert choice.logprobs is not None and choice.logprobs.refusal is None
    tokens = choice.logprobs.content
    assert len(tokens) == resp.usage.completion_tokens == 12
    assert_tokens(tokens, choice.message.content, 3)
    # Greedy: each token is the most likely one (no penalty was asked for).
    assert all(t.token == t.top_logprobs[0].token for t in tokens)
    assert_cost(resp.usage)


def test_chat_logprobs_under_a_schema_cover_every_token(client, model):
    resp = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Pick a color."}],
        temperature=0,
        response_format=COLOR_FORMAT,
        logprobs=True,
        top_logprobs=5,
    )
    choice = resp.choices[0]
    assert json.loads(choice.message.content)["color"] in ("red", "green", "blue")
    tokens = choice.logprobs.content
    # The tokens the grammar forced are listed with their real probabilities too.
    assert len(tokens) == resp.usage.completion_tokens
    for t in tokens:
        assert t.logprob <= 0 and len(t.top_logprobs) <= 5
    assert b"".join(bytes(t.bytes) for t in tokens) == choice.message.content.encode()


def test_chat_logprobs_streamed(client, model):
    # Room to end on its own: the stream helper refuses an answer cut by the limit.
    ask = dict(
        model=model,
        messages=[{"role": "user", "content": "Name three fruits."}],
        temperature=0,
        max_completion_tokens=64,
        logprobs=True,
        top_logprobs=2,
    )
    stream = client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True})
    text, tokens, usage = "", [], None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.delta.content:
                text += choice.delta.content
                tokens += choice.logprobs.content
    assert len(tokens) == usage.completion_tokens
    assert_tokens(tokens, text, 2)

    # The stream helper accumulates the same entries.
    with client.chat.completions.stream(**ask) as helper:
        final = helper.get_final_completion()
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == text
    assert_same_tokens(final.choices[0].logprobs.content, tokens)


def test_chat_logprobs_refusals_name_the_parameter(client, model):
    hi = [{"role": "user", "content": "Hi"}]
    with pytest.raises(openai.BadRequestError) as out_of_range:
        client.chat.completions.create(model=model, messages=hi, logprobs=True, top_logprobs=21, max_tokens=4)
    assert out_of_range.value.param == "top_logprobs"
    with pytest.raises(openai.BadRequestError) as without:
        client.chat.completions.create(model=model, messages=hi, top_logprobs=2, max_tokens=4)
    assert without.value.param == "top_logprobs"
    tool = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(model=model, messages=hi, logprobs=True, tools=[tool], max_tokens=4)
    assert tools.value.param == "logprobs"


def test_responses_include_logprobs(client, model):
    ask = dict(
        model=model,
        input="Name three fruits.",
        temperature=0,
        max_output_tokens=16,
        include=["message.output_text.logprobs"],
        top_logprobs=2,
        store=False,
    )
    resp = client.responses.create(**ask)
    part = resp.output[0].content[0]
    assert part.type == "output_text"
    assert len(part.logprobs) == resp.usage.output_tokens
    assert_tokens(part.logprobs, part.text, 2)

    deltas = []
    with client.responses.stream(**ask) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas += event.logprobs
        final = stream.get_final_response()
    assert_same_tokens(deltas, part.logprobs)
    assert all(len(d.top_logprobs) == 2 for d in deltas)
    streamed = final.output[0].content[0].logprobs
    assert [(t.token, t.logprob) for t in streamed] == [(d.token, d.logprob) for d in deltas]

    with pytest.raises(openai.BadRequestError) as other:
        client.responses.create(model=model, input="Hi", include=["reasoning.encrypted_content"], max_output_tokens=16)
    assert other.value.param == "include"
