"""The Batch API with the official `openai` Python SDK, unchanged: upload a JSONL of structured-output
requests (`files.create`), `batches.create`, poll `batches.retrieve` to `completed`, read the answers
(`files.content`), each valid against its schema and named by its `custom_id`; every line's cost record
at the batch price (half the online price), and the batch's usage their exact sum; a batch cancelled; a
gateway replica killed (SIGKILL) mid-batch, after which no line is run or billed twice."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import time
from decimal import Decimal

from conftest import psql
from runaii_stack import free_port
from test_openai_chat import assert_invoice_json


def batch_input(model: str, schema: dict, ids: list[str]) -> bytes:
    lines = []
    for custom_id in ids:
        body = {
            "model": model,
            "messages": [
                {"role": "system", "content": "Extract the invoice fields."},
                {"role": "user", "content": f"Invoice #{custom_id}, due 2026-11-01, total 420.00 USD."},
            ],
            "temperature": 0,
            "max_tokens": 60,
            "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "strict": True, "schema": schema}},
        }
        lines.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}))
    return ("\n".join(lines) + "\n").encode()


def wait(client, batch_id: str, until: set[str], seconds: float = 240):
    deadline = time.monotonic() + seconds
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        assert time.monotonic() < deadline, f"batch still {batch.status}"
        time.sleep(0.3)


def test_a_batch_of_invoices_runs_to_completed_at_the_batch_price(client, model, stack, invoice_schema):
    ids = [f"A-{n}" for n in range(5)]
    upload = client.files.create(file=("invoices.jsonl", io.BytesIO(batch_input(model, invoice_schema, ids))), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"job": "sdk"}
    )
    assert batch.status == "validating" and batch.metadata == {"job": "sdk"}

    batch = wait(client, batch.id, {"completed", "failed", "expired", "cancelled"})
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (5, 5, 0)
    assert batch.error_file_id is None

    lines = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert [line["custom_id"] for line in lines] == ids
    total = Decimal(0)
    for line in lines:
        assert line["response"]["status_code"] == 200 and line["error"] is None
        body = line["response"]["body"]
        assert_invoice_json(body["choices"][0]["message"]["content"])
        row = psql(
            stack.database_url,
            f"SELECT input_tokens, cached_tokens, output_tokens, cost FROM cost_records WHERE request_id = '{body['id']}'",
        ).strip()
        prompt, cached, output, cost = row.split("|")
        online = (Decimal(prompt) * Decimal("0.10") + Decimal(output) * Decimal("0.30")) / Decimal(1_000_000)
        assert Decimal(cost) == online / 2, (row, body["usage"])
        assert Decimal(str(body["usage"]["cost"])) == Decimal(cost)
        total += Decimal(cost)
    assert Decimal(batch.usage.model_extra["cost"]) == total


def test_a_cancelled_batch_ends_cancelled_with_every_line_accounted_for(client, model, invoice_schema):
    ids = [f"C-{n}" for n in range(40)]
    upload = client.files.create(file=("many.jsonl", io.BytesIO(batch_input(model, invoice_schema, ids))), purpose="batch")
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    batch = wait(client, batch.id, {"cancelled"})
    # Cancelled while validating, it has no lines; once running, every line ran or was cancelled.
    counts = batch.request_counts
    ran = counts.completed + counts.failed
    assert counts.total in (0, 40) and ran < 40
    errors = client.files.content(batch.error_file_id).text.splitlines() if batch.error_file_id else []
    assert sum(json.loads(line)["error"]["code"] == "batch_cancelled" for line in errors) == counts.total - ran


def test_a_gateway_killed_mid_batch_leaves_no_line_run_or_billed_twice(client, model, stack, invoice_schema, tmp_path):
    """A second gateway replica runs lines of the batch and is killed (SIGKILL) while one of its lines is
    running; another replica takes its lines back once it is presumed dead, and the batch completes with
    every line answered once and billed once."""
    # Presumed dead after 8 s unheard: longer than every replica's heartbeat (the stack's gateway beats every
    # 5 s), as a fleet's shared settings make it.
    env = {**stack.env, "RUNAII_REPLICA_HEARTBEAT_MS": "300", "RUNAII_REPLICA_TIMEOUT_MS": "8000", "RUNAII_BATCH_POLL_MS": "100"}
    log = open(tmp_path / "replicas.log", "wb")

    def replica() -> tuple[subprocess.Popen, str]:
        known = set(psql(stack.database_url, "SELECT id FROM gateway_replicas").split())
        process = subprocess.Popen(
            [str(stack.gateway_bin), "serve", "--listen", f"127.0.0.1:{free_port()}"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while not (new := set(psql(stack.database_url, "SELECT id FROM gateway_replicas").split()) - known):
            assert time.monotonic() < deadline and process.poll() is None, "the replica did not start"
            time.sleep(0.1)
        return process, new.pop()

    doomed, doomed_id = replica()
    # The survivor takes the dead replica's lines back within its own (short) timeout.
    survivor, _ = replica()
    try:
        ids = [f"K-{n}" for n in range(40)]
        upload = client.files.create(file=("kill.jsonl", io.BytesIO(batch_input(model, invoice_schema, ids))), purpose="batch")
        batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
        # Kill the first new replica while it runs a line of the batch.
        deadline = time.monotonic() + 120
        while psql(stack.database_url, f"SELECT count(*) FROM batch_lines WHERE batch_id = '{batch.id}' AND state = 'running' AND claimed_by = '{doomed_id}'").strip() == "0":
            assert time.monotonic() < deadline, "the doomed replica never ran a line"
            time.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()

        batch = wait(client, batch.id, {"completed", "failed", "expired", "cancelled"})
        assert batch.status == "completed", batch
        assert batch.request_counts.total == 40
        states = psql(stack.database_url, f"SELECT state, count(*) FROM batch_lines WHERE batch_id = '{batch.id}' GROUP BY state").split()
        assert all(s.split("|")[0] in ("succeeded", "failed") for s in states), states
        # No line was sent to the ledger twice (a second settle of one request id would be its 503).
        codes = psql(stack.database_url, f"SELECT DISTINCT status_code FROM batch_lines WHERE batch_id = '{batch.id}'").split()
        assert set(codes) <= {"200", "500"}, psql(
            stack.database_url, f"SELECT line, response FROM batch_lines WHERE batch_id = '{batch.id}' AND status_code NOT IN (200, 500)"
        )
        lost = psql(stack.database_url, f"SELECT count(*) FROM batch_lines WHERE batch_id = '{batch.id}' AND response LIKE '%batch_line_lost%'").strip()
        billed = psql(
            stack.database_url,
            f"SELECT count(*) FROM cost_records c JOIN batch_lines l ON l.request_id = c.request_id WHERE l.batch_id = '{batch.id}'",
        ).strip()
        # Every line answered 200 has its one record; a lost line's record is the run that was billed.
        answered = batch.request_counts.completed
        assert int(billed) == answered + int(lost), (billed, answered, lost)
        output = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
        assert len({line["custom_id"] for line in output}) == len(output) == answered
    finally:
        for process in (doomed, survivor):
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
        log.close()
