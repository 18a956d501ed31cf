"""Chat Completions through the gateway with the official `openai` Python SDK."""

from __future__ import annotations

import json
import numbers

import openai
import pytest

INVOICE_KEYS = {"invoice_number", "due_date", "total", "currency"}


def assert_invoice_json(text: str) -> dict:
    invoice = json.loads(text)
    assert set(invoice) == INVOICE_KEYS, text
    assert isinstance(invoice["invoice_number"], str)
    assert isinstance(invoice["due_date"], str)
    assert isinstance(invoice["total"], numbers.Number) and not isinstance(invoice["total"], bool)
    assert isinstance(invoice["currency"], str)
    return invoice


def assert_cost(usage) -> float:
    """The gateway's extension: `usage.cost`, USD, a JSON number, kept by the SDK as an extra field."""
    assert usage is not None
    cost = (usage.model_extra or {}).get("cost")
    assert cost == usage.to_dict().get("cost")
    assert isinstance(cost, (int, float)) and not isinstance(cost, bool), f"cost is {cost!r}"
    assert cost > 0
    return cost


def test_create_json_schema(client, model, invoice_messages, invoice_response_format):
    resp = client.chat.completions.create(
        model=model, messages=invoice_messages, temperature=0, response_format=invoice_response_format
    )
    assert resp.object == "chat.completion"
    assert resp.model == model
    assert resp.id.startswith("chatcmpl-")
    assert resp._request_id == resp.id  # x-request-id is the completion's id
    assert len(resp.choices) == 1
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert_invoice_json(choice.message.content)
    usage = resp.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    cost = assert_cost(usage)
    # 0.10 USD per million input tokens, 0.30 per million output tokens (the prices the fixture set).
    expected = (usage.prompt_tokens * 0.10 + usage.completion_tokens * 0.30) / 1_000_000
    assert cost == pytest.approx(expected, rel=1e-6, abs=1e-12)
    # The worker's timings are not part of the gateway's answer.
    assert "timings" not in (resp.model_extra or {})


def test_parse_pydantic(client, model, invoice_messages, invoice_model):
    resp = client.chat.completions.parse(
        model=model, messages=invoice_messages, temperature=0, response_format=invoice_model
    )
    message = resp.choices[0].message
    assert message.refusal is None
    assert isinstance(message.parsed, invoice_model)
    assert message.parsed == invoice_model.model_validate_json(message.content)
    assert_cost(resp.usage)


def test_stream_with_usage(client, model, invoice_messages, invoice_response_format):
    stream = client.chat.completions.create(
        model=model,
        messages=invoice_messages,
        temperature=0,
        response_format=invoice_response_format,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert len(chunks) >= 3
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    with_role = [c for c in chunks if c.choices and c.choices[0].delta.role is not None]
    assert len(with_role) == 1, "exactly one chunk carries the role"
    assert with_role[0].choices[0].delta.role == "assistant"
    assert chunks[0] is with_role[0]
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
    assert len(finishing) == 1 and finishing[0].choices[0].finish_reason == "stop"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.completion_tokens > 0
    assert_cost(last.usage)
    assert all(c.usage is None for c in chunks[:-1]), "usage comes once, on the last chunk"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert_invoice_json(content)


def test_stream_without_usage(client, model, invoice_messages, invoice_response_format):
    chunks = list(
        client.chat.completions.create(
            model=model, messages=invoice_messages, temperature=0, response_format=invoice_response_format, stream=True
        )
    )
    assert all(c.choices for c in chunks), "no usage chunk unless the client asked for it"
    assert all(c.usage is None for c in chunks)
    assert_invoice_json("".join(c.choices[0].delta.content or "" for c in chunks))


def test_stream_helper_pydantic(client, model, invoice_messages, invoice_model):
    with client.chat.completions.stream(
        model=model,
        messages=invoice_messages,
        temperature=0,
        response_format=invoice_model,
        stream_options={"include_usage": True},
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    kinds = {e.type for e in events}
    assert {"chunk", "content.delta", "content.done"} <= kinds
    done = [e for e in events if e.type == "content.done"]
    assert len(done) == 1 and isinstance(done[0].parsed, invoice_model)
    message = final.choices[0].message
    assert isinstance(message.parsed, invoice_model)
    assert message.parsed == done[0].parsed
    assert final.usage is not None and final.usage.completion_tokens > 0


def test_several_answers_share_one_prompt(client, model, invoice_messages, invoice_response_format):
    one = client.chat.completions.create(
        model=model, messages=invoice_messages, temperature=0, response_format=invoice_response_format
    )
    three = client.chat.completions.create(
        model=model, messages=invoice_messages, temperature=0, response_format=invoice_response_format, n=3
    )
    assert [c.index for c in three.choices] == [0, 1, 2]
    for choice in three.choices:
        assert choice.finish_reason == "stop"
        assert choice.message.content == one.choices[0].message.content  # greedy: each is the answer alone
        assert_invoice_json(choice.message.content)
    # The prompt is billed once, every answer's tokens.
    assert three.usage.prompt_tokens == one.usage.prompt_tokens
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens
    cost = assert_cost(three.usage)
    expected = (three.usage.prompt_tokens * 0.10 + three.usage.completion_tokens * 0.30) / 1_000_000
    assert cost == pytest.approx(expected, rel=1e-6, abs=1e-12)

    stream = client.chat.completions.create(
        model=model,
        messages=invoice_messages,
        temperature=0,
        response_format=invoice_response_format,
        n=2,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    texts = {0: "", 1: ""}
    finished = []
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        texts[choice.index] += choice.delta.content or ""
        if choice.finish_reason is not None:
            finished.append(choice.index)
    assert sorted(finished) == [0, 1]
    assert texts == {0: one.choices[0].message.content, 1: one.choices[0].message.content}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 2 * one.usage.completion_tokens

    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=model, messages=invoice_messages, n=129)
    assert refused.value.param == "n" and refused.value.code == "invalid_value"


@pytest.mark.parametrize("kind", ["malformed", "unknown_id", "wrong_secret"])
def test_invalid_key(stack, model, kind):
    public_id = stack.api_key.split("-")[1]
    key = {
        "malformed": "sk-not-a-runaii-key",
        "unknown_id": "rk-0123456789ab-" + "0" * 48,
        "wrong_secret": f"rk-{public_id}-" + "0" * 48,
    }[kind]
    bad = stack.openai(api_key=key)
    with pytest.raises(openai.AuthenticationError) as raised:
        bad.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"


def test_unknown_model(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.code == "model_not_found"


def test_schema_the_engine_cannot_enforce(client, model):
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2}},
        "required": ["tags"],
        "additionalProperties": False,
    }
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Three tags for a cat photo."}],
            response_format={"type": "json_schema", "json_schema": {"name": "tags", "schema": schema}},
        )
    assert raised.value.status_code == 400
    assert raised.value.code == "upstream_rejected"
    assert raised.value.param == "response_format"
    assert "uniqueItems" in raised.value.message


def test_models_list_and_retrieve(client, model):
    ids = [m.id for m in client.models.list()]
    assert model in ids
    retrieved = client.models.retrieve(model)
    assert retrieved.id == model and retrieved.object == "model"
