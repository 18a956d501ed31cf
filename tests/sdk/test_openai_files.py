"""The Files API with the official `openai` Python SDK, as a Batch API customer uses it: upload a JSONL
input (`files.create`), find it (`files.retrieve`, `files.list` with its pagination), read it back
(`files.content`), delete it; a malformed input and a purpose not offered refused as `BadRequestError`
naming the field."""

from __future__ import annotations

import io
import json

import openai
import pytest


def batch_input(model: str, n: int) -> bytes:
    lines = []
    for i in range(n):
        body = {"model": model, "messages": [{"role": "user", "content": f"Invoice #{i}"}], "max_tokens": 8}
        lines.append(json.dumps({"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}))
    return ("\n".join(lines) + "\n").encode()


def test_upload_list_read_and_delete(client, model):
    data = batch_input(model, 25)
    created = client.files.create(file=("invoices.jsonl", io.BytesIO(data)), purpose="batch")
    assert created.id.startswith("file-")
    assert (created.object, created.purpose, created.status, created.filename) == ("file", "batch", "processed", "invoices.jsonl")
    assert created.bytes == len(data)
    assert created.expires_at - created.created_at == 30 * 24 * 3600

    assert client.files.retrieve(created.id) == created
    assert client.files.content(created.id).content == data

    second = client.files.create(
        file=("more.jsonl", io.BytesIO(batch_input(model, 1))),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert second.expires_at - second.created_at == 3600
    # The SDK's auto-pagination follows `after` one file at a time.
    listed = [f.id for f in client.files.list(limit=1, purpose="batch")]
    assert listed[:2] == [second.id, created.id]

    for file in (created, second):
        deleted = client.files.delete(file.id)
        assert (deleted.id, deleted.deleted) == (file.id, True)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(created.id)


def test_a_bad_input_is_refused_naming_the_line(client, model):
    bad = batch_input(model, 2) + b'{"custom_id": "line-0", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=("bad.jsonl", io.BytesIO(bad)), purpose="batch")
    assert refused.value.param == "file"
    assert "line 3" in refused.value.message and "custom_id 'line-0'" in refused.value.message

    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=("notes.txt", io.BytesIO(b"hello")), purpose="assistants")
    assert refused.value.param == "purpose"
