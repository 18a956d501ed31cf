"""Credits, rate-limit headers and idempotency as the official `openai` SDK sees them."""

import time
import uuid

import openai
import pytest

MESSAGES = [{"role": "user", "content": "Say hi."}]


def test_insufficient_credit_is_402_and_not_retried(stack, model):
    client = stack.openai(api_key=stack.broke_api_key, max_retries=3)
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=8)
    assert caught.value.status_code == 402
    assert caught.value.code == "insufficient_credits"
    assert caught.value.response.headers["x-should-retry"] == "false"
    # Three retries with the SDK's backoff would take well over a second.
    assert time.monotonic() - started < 1.0


def test_rate_limit_headers_on_every_answer(client, model):
    raw = client.chat.completions.with_raw_response.create(model=model, messages=MESSAGES, max_tokens=8)
    completion = raw.parse()
    assert completion.usage.total_tokens > 0
    for name in ("limit", "remaining", "reset"):
        for kind in ("requests", "tokens"):
            assert raw.headers.get(f"x-ratelimit-{name}-{kind}"), f"x-ratelimit-{name}-{kind}"
    assert raw.headers["x-request-id"] == completion.id


def test_idempotent_retry_returns_the_same_completion(client, model):
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = client.chat.completions.with_raw_response.create(
        model=model, messages=MESSAGES, max_tokens=8, temperature=1.0, extra_headers=key
    )
    second = client.chat.completions.with_raw_response.create(
        model=model, messages=MESSAGES, max_tokens=8, temperature=1.0, extra_headers=key
    )
    assert second.headers["idempotent-replayed"] == "true"
    assert second.parse().id == first.parse().id
    assert second.parse().choices[0].message.content == first.parse().choices[0].message.content
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=9, extra_headers=key)
    assert caught.value.code == "idempotency_key_reused"
