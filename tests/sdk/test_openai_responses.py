"""The Responses API through the gateway with the official `openai` Python SDK."""

from __future__ import annotations

import openai
import pytest

from test_openai_chat import INVOICE_KEYS, assert_cost, assert_invoice_json

INVOICE_TEXT = "Invoice #A-1024, due 2026-11-01, total 420.00 USD."


def invoice_format(invoice_schema: dict) -> dict:
    return {"type": "json_schema", "name": "invoice", "strict": True, "schema": invoice_schema}


def test_create_with_json_schema_format(client, model, invoice_schema):
    resp = client.responses.create(
        model=model,
        instructions="Extract the invoice fields.",
        input=INVOICE_TEXT,
        temperature=0,
        text={"format": invoice_format(invoice_schema)},
    )
    assert resp.object == "response"
    assert resp.status == "completed"
    assert resp.id.startswith("resp_")
    assert resp._request_id == resp.id
    assert resp.output[0].type == "message"
    assert resp.output[0].content[0].type == "output_text"
    assert_invoice_json(resp.output_text)
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    assert_cost(resp.usage)


def test_parse_with_pydantic_model(client, model, invoice_model):
    resp = client.responses.parse(
        model=model,
        instructions="Extract the invoice fields.",
        input=[{"role": "user", "content": INVOICE_TEXT}],
        temperature=0,
        text_format=invoice_model,
    )
    parsed = resp.output_parsed
    assert isinstance(parsed, invoice_model)
    assert set(parsed.model_dump()) == INVOICE_KEYS


def test_stream_helper_yields_deltas_and_final_response(client, model, invoice_schema):
    deltas = []
    with client.responses.stream(
        model=model,
        instructions="Extract the invoice fields.",
        input=INVOICE_TEXT,
        temperature=0,
        text={"format": invoice_format(invoice_schema)},
    ) as stream:
        kinds = []
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "".join(deltas) == final.output_text
    assert_invoice_json(final.output_text)
    assert_cost(final.usage)


def test_refusals_map_to_sdk_errors(client, model):
    with pytest.raises(openai.BadRequestError) as bad_format:
        client.responses.create(model=model, input="x", text={"format": {"type": "yaml"}})
    assert bad_format.value.code == "invalid_request"
    with pytest.raises(openai.BadRequestError) as previous:
        client.responses.create(model=model, input="x", previous_response_id="resp_missing")
    assert previous.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError) as rejected:
        schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "minItems": 2}
        client.responses.create(
            model=model, input="x", text={"format": {"type": "json_schema", "name": "u", "schema": schema}}
        )
    assert rejected.value.code == "upstream_rejected"
