"""Schemathesis hooks for runaii (scripts/fuzz-api.sh loads them).

- Inference requests stay short: the embedded model decodes on two CPU cores, and a request without a
  token limit would generate until the context is full. Integer limits above FUZZ_MAX_TOKENS are cut to
  it and a missing limit is set; a limit of the wrong type or sign is left as generated, so negative
  cases stay negative.
- Three in four generated model ids become the model under test, so requests reach the worker instead
  of stopping at 404 (the fourth keeps the 404 path tested).
- A well-formed Idempotency-Key is made unique per request: a fixed generated key would turn every
  later request of the operation into a 422 (key reused with another body), which is correct and says
  nothing more. gateway/tests/openapi.rs covers replays and reuse.
- Changes aimed at what the run depends on (its tenant, its key, the model under test, which the fuzzer
  learns from list answers) go to scratch twins instead: revoking the key or replacing the model's
  workers would turn the rest of the run into 401s and 503s.
"""

import os
import uuid
import zlib

import schemathesis

MAX_TOKENS = int(os.environ.get("FUZZ_MAX_TOKENS", "8"))

# The field each route reads its output limit from.
LIMITS = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/responses": ("max_output_tokens",),
    "/v1/messages": ("max_tokens",),
}

# What the run depends on → its scratch twin.
PROTECTED = {
    os.environ.get("RUNAII_FUZZ_TENANT_ID", "-"): os.environ.get("RUNAII_FUZZ_SCRATCH_TENANT_ID", "-"),
    os.environ.get("RUNAII_FUZZ_KEY_ID", "-"): os.environ.get("RUNAII_FUZZ_SCRATCH_KEY_ID", "-"),
    os.environ.get("RUNAII_FUZZ_MODEL", "-"): os.environ.get("RUNAII_FUZZ_SCRATCH_MODEL", "-"),
}


def _limit_tokens(case):
    fields = LIMITS.get(case.operation.path)
    if fields is None or not isinstance(case.body, dict):
        return
    present = [f for f in fields if f in case.body]
    for field in present:
        value = case.body[field]
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_TOKENS:
            case.body[field] = MAX_TOKENS
    if not present:
        case.body[fields[0]] = MAX_TOKENS


def _real_model(case):
    if case.operation.path not in LIMITS or not isinstance(case.body, dict):
        return
    model = case.body.get("model")
    if isinstance(model, str) and zlib.crc32(model.encode()) % 4 != 0:
        case.body["model"] = os.environ.get("RUNAII_FUZZ_MODEL", model)


def _fresh_idempotency_key(case):
    for name in list(case.headers or {}):
        value = case.headers[name]
        if name.lower() == "idempotency-key" and isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable():
            case.headers[name] = f"fuzz-{uuid.uuid4()}"


def _spare_the_run(case):
    if not case.operation.path.startswith("/admin/") or case.operation.method.upper() == "GET":
        return
    for name, value in (case.path_parameters or {}).items():
        if value in PROTECTED:
            case.path_parameters[name] = PROTECTED[value]


@schemathesis.hook
def before_call(context, case, kwargs):
    _limit_tokens(case)
    _real_model(case)
    _fresh_idempotency_key(case)
    _spare_the_run(case)
