"""A private runaii stack for tests that drive the gateway with official SDKs.

One stack per test session, from tests/runaii_stack.py (a fresh database, a worker and a gateway on free
ports, a demo tenant key; all gone at teardown).

Fixtures for test modules:
  stack          the Stack (gateway URL, key, model, database URL, log files)
  client         openai.OpenAI pointed at the gateway's /v1 with the demo key
  invoice_*      the README's invoice example (messages, JSON Schema, response_format, pydantic model)

The binaries come from $CARGO_TARGET_DIR/debug (default ~/.cache/runaii/target/debug): build them first
with `cargo build --locked -p runaii-worker -p runaii-gateway` (scripts/test.sh does).
"""

from __future__ import annotations

import sys
from pathlib import Path

import openai
import pydantic
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runaii_stack import MODEL, Stack, StackUnavailable, psql, start_stack  # noqa: E402

__all__ = ["MODEL", "Stack", "psql"]


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    try:
        with start_stack(tmp_path_factory.mktemp("runaii-logs")) as stack:
            yield stack
    except StackUnavailable as e:
        pytest.exit(str(e), returncode=2)


@pytest.fixture(scope="session")
def client(stack: Stack) -> openai.OpenAI:
    return stack.openai()


@pytest.fixture(scope="session")
def model(stack: Stack) -> str:
    return stack.model


class Invoice(pydantic.BaseModel):
    invoice_number: str
    due_date: str
    total: float
    currency: str


@pytest.fixture(scope="session")
def invoice_model() -> type[Invoice]:
    """The README's invoice as a pydantic model, for `parse`/`stream` helpers and `text_format`."""
    return Invoice


@pytest.fixture(scope="session")
def invoice_messages() -> list[dict]:
    return [
        {"role": "system", "content": "Extract the invoice fields."},
        {"role": "user", "content": "Invoice #A-1024, due 2026-11-01, total 420.00 USD."},
    ]


@pytest.fixture(scope="session")
def invoice_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "invoice_number": {"type": "string"},
            "due_date": {"type": "string"},
            "total": {"type": "number"},
            "currency": {"type": "string"},
        },
        "required": ["invoice_number", "due_date", "total", "currency"],
        "additionalProperties": False,
    }


@pytest.fixture(scope="session")
def invoice_response_format(invoice_schema: dict) -> dict:
    """Chat Completions `response_format` for the invoice schema."""
    return {"type": "json_schema", "json_schema": {"name": "invoice", "strict": True, "schema": invoice_schema}}
