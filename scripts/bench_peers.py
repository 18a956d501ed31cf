#!/usr/bin/env python3
"""The Python half of scripts/bench-peers.sh: the constrained-decoding client, CPU accounting and the report.

    bench_peers.py constrained --url URL --engine NAME --request invoice|form|story --concurrency N --rounds R \
        --max-tokens M --out FILE.json
    bench_peers.py evicted --url URL --engine NAME --out FILE.json   # a shared prompt: cold, warm, evicted
    bench_peers.py cpu PID...            # prints CPU seconds (utime+stime) of the PIDs and all their descendants
    bench_peers.py report DIR            # markdown tables from DIR/*.json

The same requests go to every engine, in the same order. Tokens/s is computed one way for all of them:
the completion tokens the answers' `usage` reports, summed, divided by the wall time of the cell (every
round, prompts included). Each answer that ended by itself (`finish_reason: "stop"`) is parsed and
validated against the request's schema (jsonschema, Draft 2020-12).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse

import jsonschema

MODEL_PATH_ID = "smollm2-135m-instruct"

# The seed's invoice example (testkit/src/lib.rs `invoice_request` / `invoice_schema`), with the invoice's
# number and total varied per request so no engine answers from a cached identical prompt.
INVOICE_SCHEMA = {
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

# The worker bench's long answer (worker/examples/bench.rs): minLength keeps the model writing prose inside
# the string until max_tokens on every engine, so all generate max_tokens tokens. 1500, not the worker
# bench's 4000: llama-server refuses a repetition over 2000 ("failed to parse grammar").
STORY_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "story": {"type": "string", "minLength": 1500}},
    "required": ["title", "story"],
}


def invoice_request(n: int, max_tokens: int) -> tuple[dict, dict]:
    number, total = f"A-{1024 + n}", 420 + n
    body = {
        "model": MODEL_PATH_ID,
        "messages": [
            {"role": "system", "content": "Extract the invoice fields."},
            {"role": "user", "content": f"Invoice #{number}, due 2026-11-01, total {total}.00 USD."},
        ],
        "temperature": 0,
        "max_tokens": max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "invoice", "strict": True, "schema": INVOICE_SCHEMA},
        },
    }
    truth = {"invoice_number": number, "due_date": "2026-11-01", "total": float(total), "currency": "USD"}
    return body, truth


# An order form of 13 fields, most copied from the document (testkit/src/lib.rs `order_form_request`), with
# the order number and quantity varied per request.
FORM_FIELDS = [
    "order_id", "order_date", "customer_name", "email", "phone", "street", "city", "postal_code", "country",
    "product",
]
FORM_SCHEMA = {
    "type": "object",
    "properties": {
        **{name: {"type": "string"} for name in FORM_FIELDS},
        "quantity": {"type": "integer"},
        "unit_price": {"type": "number"},
        "total": {"type": "number"},
    },
    "required": [*FORM_FIELDS, "quantity", "unit_price", "total"],
    "additionalProperties": False,
}


def form_request(n: int, max_tokens: int) -> tuple[dict, dict]:
    number, quantity = 58213 + n, 2 + n % 5
    cents = quantity * 4995
    total = f"{cents // 100}.{cents % 100:02d}"
    document = (
        f"Order PO-{number} was placed on 2026-10-14 by Margaret Okonkwo-Hale (margaret.hale@example.org, "
        f"+44 20 7946 0123). Ship to 221 Baker Street, London, NW1 6XE, United Kingdom. Items: {quantity} x "
        f"Ergonomic Walnut Desk Organizer at 49.95 GBP each, total {total} GBP."
    )
    body = {
        "model": MODEL_PATH_ID,
        "messages": [
            {"role": "system", "content": "Extract the order form's fields from the document."},
            {"role": "user", "content": document},
        ],
        "temperature": 0,
        "max_tokens": max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "order_form", "strict": True, "schema": FORM_SCHEMA},
        },
    }
    truth = {
        "order_id": f"PO-{number}", "order_date": "2026-10-14", "customer_name": "Margaret Okonkwo-Hale",
        "email": "margaret.hale@example.org", "phone": "+44 20 7946 0123", "street": "221 Baker Street",
        "city": "London", "postal_code": "NW1 6XE", "country": "United Kingdom",
        "product": "Ergonomic Walnut Desk Organizer", "quantity": quantity, "unit_price": 49.95,
        "total": float(total),
    }
    return body, truth


def story_request(n: int, max_tokens: int) -> tuple[dict, dict]:
    body = {
        "model": MODEL_PATH_ID,
        "messages": [{"role": "user", "content": f"Write a long story about dragon number {n}, with a title."}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": STORY_SCHEMA}},
    }
    return body, {}


# A long system prompt shared by a tenant's requests (a billing handbook of numbered clauses, about 1,500
# tokens), and eight other long prompts that take every slot of both engines after it.
def handbook(team: int) -> str:
    topics = ["invoice numbers", "due dates", "currencies", "totals", "credit notes", "purchase orders",
              "tax lines", "discounts", "shipping fees", "payment terms", "vendors", "refunds"]
    clauses = []
    for i in range(42):
        topic = topics[i % len(topics)]
        clauses.append(f"Clause {i + 1}: when a document mentions {topic}, copy the value exactly as written, keep "
                       f"its original spelling, and never invent a value that clause {(i * 7) % 42 + 1} does not allow.")
    return f"You extract invoice fields for accounts team {team}. " + " ".join(clauses)


def shared_request(team: int, n: int, max_tokens: int) -> tuple[dict, dict]:
    body, truth = invoice_request(n, max_tokens)
    body["messages"][0]["content"] = handbook(team)
    return body, truth


def filler_request(n: int, max_tokens: int) -> tuple[dict, dict]:
    lines = " ".join(f"Line {i}: the {n}th caravan crossed river {i * 3 + n} before dawn and counted its camels." for i in range(40))
    body = {
        "model": MODEL_PATH_ID,
        "messages": [{"role": "system", "content": f"You are chronicle keeper {n}."}, {"role": "user", "content": lines}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    return body, {}


REQUESTS = {
    "invoice": (invoice_request, INVOICE_SCHEMA),
    "form": (form_request, FORM_SCHEMA),
    "story": (story_request, STORY_SCHEMA),
}


def post(url: str, body: dict, timeout: float) -> tuple[int, dict, float]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    started = time.monotonic()
    try:
        headers = {"content-type": "application/json"}
        # Workers serve only gateways: the bench speaks as one (llama-server is given the same token).
        if os.environ.get("RUNAII_WORKER_TOKEN"):
            headers["authorization"] = f"Bearer {os.environ['RUNAII_WORKER_TOKEN']}"
        conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data or b"{}"), time.monotonic() - started
    finally:
        conn.close()


def judge(answer: dict, schema: dict, truth: dict) -> dict:
    choice = (answer.get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content") or ""
    finish = choice.get("finish_reason")
    verdict = {"finish_reason": finish, "valid": None, "fields_right": None, "content": content[:300]}
    # Every answer is checked as delivered, whatever its finish_reason: an answer cut at max_tokens can
    # still hold a complete object (llama-server's grammar lets whitespace follow the closing brace).
    try:
        value = json.loads(content)
        jsonschema.Draft202012Validator(schema).validate(value)
        verdict["valid"] = True
    except (ValueError, jsonschema.ValidationError) as e:
        verdict["valid"] = False
        verdict["why"] = str(e)[:200]
        return verdict
    if truth:
        verdict["fields_right"] = sum(1 for k, v in truth.items() if value.get(k) == v)
    return verdict


def machine_busy() -> int:
    """Busy jiffies of the whole machine (every CPU: user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + (fields[7] if len(fields) > 7 else 0)


def tree_ticks(roots: set[int]) -> int:
    """utime+stime jiffies of the processes in `roots` and all their descendants."""
    parent, ticks = {}, {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                text = f.read()
        except OSError:
            continue
        pid = int(stat.split("/")[2])
        fields = text[text.rindex(")") + 2 :].split()
        parent[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    total = 0
    for pid, t in ticks.items():
        p = pid
        while p and p not in roots:
            p = parent.get(p, 0)
        if p:
            total += t
    return total


def per_token(timings: dict) -> float | None:
    """Milliseconds per generated token: the worker's generation_ms, llama-server's predicted_ms."""
    n = timings.get("predicted_n")
    ms = timings.get("generation_ms", timings.get("predicted_ms"))
    return ms / n if n and ms is not None else None


def summarise(rows: list[dict], key: str, how=statistics.mean) -> float | None:
    """`how` (the mean, or the median) of `key` over the rows that have it."""
    values = [r[key] for r in rows if r.get(key) is not None]
    return how(values) if values else None


def constrained(args: argparse.Namespace) -> None:
    make, schema = REQUESTS[args.request]
    answers = []
    wall = 0.0
    # Every request of a run differs (--first per cell): llama-server reuses a slot's cached prompt, so a
    # prompt repeated from an earlier cell would skip its prefill there and not in the worker.
    n = args.first
    # What else the machine did meanwhile: busy CPU time that was neither the engine's nor this client's.
    engine = {args.pid} if args.pid else set()
    busy0, engine0, self0 = machine_busy(), tree_ticks(engine), tree_ticks({os.getpid()})
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for _ in range(args.rounds):
            batch = []
            for _ in range(args.concurrency):
                batch.append(make(n, args.max_tokens))
                n += 1
            started = time.monotonic()
            futures = [pool.submit(post, args.url, body, args.timeout) for body, _ in batch]
            results = [f.result() for f in futures]
            wall += time.monotonic() - started
            for (status, answer, seconds), (_, truth) in zip(results, batch):
                usage = answer.get("usage") or {}
                timings = answer.get("timings") or {}
                row = {
                    "status": status,
                    "seconds": seconds,
                    "prompt_tokens": usage.get("prompt_tokens"),
                    "completion_tokens": usage.get("completion_tokens", 0),
                    "predicted_per_second": timings.get("predicted_per_second"),
                    # Time to first token and per output token, from each engine's own timings (the worker
                    # reports its queue apart; llama-server's 8 slots never queue 8 requests).
                    "ttft_ms": timings["queue_ms"] + timings["prompt_ms"] if "queue_ms" in timings else timings.get("prompt_ms"),
                    "tpot_ms": per_token(timings),
                }
                if status == 200:
                    row.update(judge(answer, schema, truth))
                else:
                    row["error"] = json.dumps(answer)[:300]
                answers.append(row)
    hz = os.sysconf("SC_CLK_TCK")
    busy, engine_cpu, self_cpu = machine_busy() - busy0, tree_ticks(engine) - engine0, tree_ticks({os.getpid()}) - self0
    tokens = sum(a["completion_tokens"] or 0 for a in answers)
    per_stream = [a["predicted_per_second"] for a in answers if a.get("predicted_per_second")]
    ok = [a for a in answers if a["status"] == 200]
    finished = [a for a in ok if a.get("finish_reason") == "stop"]
    seconds = [a["seconds"] for a in ok]
    summary = {
        "kind": "constrained",
        "condition": args.condition,
        "engine": args.engine,
        "pass": args.pass_no,
        "request": args.request,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "max_tokens": args.max_tokens,
        "requests": len(answers),
        "ok": len(ok),
        "completion_tokens": tokens,
        "prompt_tokens": sum(a["prompt_tokens"] or 0 for a in ok),
        "wall_s": wall,
        "tokens_per_s": tokens / wall if wall else 0.0,
        "per_stream_decode_tok_s": statistics.mean(per_stream) if per_stream else None,
        "mean_request_s": statistics.mean(seconds) if seconds else None,
        "mean_ttft_ms": summarise(ok, "ttft_ms"),
        "mean_tpot_ms": summarise(ok, "tpot_ms"),
        "engine_cores": engine_cpu / hz / wall if wall else None,
        "others_cores": max(busy - engine_cpu - self_cpu, 0) / hz / wall if wall and engine else None,
        "finished": len(finished),
        "cut_at_length": sum(1 for a in ok if a.get("finish_reason") == "length"),
        "valid": sum(1 for a in ok if a.get("valid")),
        "invalid": sum(1 for a in ok if a.get("valid") is False),
        "fields_right": sum(a.get("fields_right") or 0 for a in ok),
        "answers": answers,
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    brief = {k: v for k, v in summary.items() if k != "answers"}
    print(json.dumps(brief))
    print("  e.g.", answers[0].get("content") or answers[0].get("error"))


def measured(status: int, answer: dict, seconds: float, schema: dict, truth: dict) -> dict:
    usage, timings = answer.get("usage") or {}, answer.get("timings") or {}
    row = {
        "status": status,
        "seconds": seconds,
        "prompt_tokens": usage.get("prompt_tokens"),
        # Prompt tokens the engine did not compute: the worker's and llama-server's `timings.cache_n`.
        "cached_tokens": timings.get("cache_n"),
        "ttft_ms": timings["queue_ms"] + timings["prompt_ms"] if "queue_ms" in timings else timings.get("prompt_ms"),
    }
    if status == 200:
        row.update(judge(answer, schema, truth))
    else:
        row["error"] = json.dumps(answer)[:300]
    return row


def evicted(args: argparse.Namespace) -> None:
    """A tenant's long system prompt: its first request (cold), five more right behind it (warm), then eight
    other long prompts at once, which take every slot, then the shared prompt again (evicted)."""
    # The handbook names the run's first request: another pass, another handbook, cold again.
    team, n = args.first, args.first
    timeline = []
    for phase, count in (("cold", 1), ("warm", 5)):
        for _ in range(count):
            body, truth = shared_request(team, n, args.max_tokens)
            n += 1
            timeline.append({"phase": phase, **measured(*post(args.url, body, args.timeout), INVOICE_SCHEMA, truth)})
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        fillers = list(pool.map(lambda i: post(args.url, filler_request(n + i, 8)[0], args.timeout), range(8)))
    n += 8
    filler_status = sorted({status for status, _, _ in fillers})
    body, truth = shared_request(team, n, args.max_tokens)
    timeline.append({"phase": "evicted", **measured(*post(args.url, body, args.timeout), INVOICE_SCHEMA, truth)})
    phase = lambda name: [r for r in timeline if r["phase"] == name and r["status"] == 200]
    summary = {
        "kind": "evicted",
        "engine": args.engine,
        "pass": args.pass_no,
        "filler_status": filler_status,
        "filler_prompt_tokens": [((a.get("usage") or {}).get("prompt_tokens")) for _, a, _ in fillers],
        **{f"{name}_s": summarise(phase(name), "seconds") for name in ("cold", "warm", "evicted")},
        **{f"{name}_ttft_ms": summarise(phase(name), "ttft_ms") for name in ("cold", "warm", "evicted")},
        "evicted_cached_tokens": summarise(phase("evicted"), "cached_tokens"),
        "prompt_tokens": summarise(phase("cold"), "prompt_tokens"),
        "valid": sum(1 for r in timeline if r.get("valid")),
        "requests": len(timeline),
        "answers": timeline,
    }
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "answers"}))


def cpu(args: argparse.Namespace) -> None:
    """utime+stime, in seconds, of the given processes and all their descendants (LiteLLM forks workers)."""
    print(f"{tree_ticks({int(p) for p in args.pids}) / os.sysconf('SC_CLK_TCK'):.2f}")


def wait_quiet(args: argparse.Namespace) -> None:
    """Waits (at most --max-s) until the machine's busy CPU stays under --below cores for --window-s."""
    hz, deadline = os.sysconf("SC_CLK_TCK"), time.monotonic() + args.max_s
    while True:
        before = machine_busy()
        time.sleep(args.window_s)
        cores = (machine_busy() - before) / hz / args.window_s
        if cores < args.below:
            print(f"quiet: {cores:.2f} cores busy")
            return
        if time.monotonic() > deadline:
            print(f"not quiet after {args.max_s:.0f} s ({cores:.2f} cores busy): measuring anyway")
            return


def fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def report(args: argparse.Namespace) -> None:
    runs = []
    for path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    cons = [r for r in runs if r.get("kind") == "constrained"]
    if cons:
        print("| engine | pass | request | concurrency | answers | completion tokens | wall s | tok/s (usage ÷ wall) "
              "| per-stream decode tok/s | TTFT ms | ms per output token | mean s per answer | stop / length "
              "| valid JSON | fields right | engine's CPU (cores) | others' CPU (cores) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        order = {"invoice": 0, "form": 1, "story": 2}
        fields_per_answer = {"invoice": 4, "form": 13}
        def condition(r: dict) -> str:
            return r.get("condition") or "quiet"

        def label(request: str, cond: str) -> str:
            return request if cond == "quiet" else f"{request}, {cond}"

        for r in sorted(cons, key=lambda r: (condition(r) != "quiet", order[r["request"]], r["concurrency"], r["engine"] != "worker", r["pass"])):
            per = fields_per_answer.get(r["request"])
            fields = f"{r['fields_right']}/{per * r['ok']}" if per else "—"
            print(f"| {r['engine']} | {r['pass']} | {label(r['request'], condition(r))} | {r['concurrency']} | {r['ok']}/{r['requests']} "
                  f"| {r['completion_tokens']:,} | {r['wall_s']:.2f} | **{r['tokens_per_s']:.1f}** "
                  f"| {fmt(r['per_stream_decode_tok_s'])} | {fmt(r.get('mean_ttft_ms'))} | {fmt(r.get('mean_tpot_ms'), 2)} "
                  f"| {fmt(r.get('mean_request_s'), 2)} "
                  f"| {r['finished']} / {r['cut_at_length']} | {r['valid']}/{r['ok']} | {fields} "
                  f"| {fmt(r.get('engine_cores'), 2)} | {fmt(r.get('others_cores'), 2)} |")
        print()
        # Per cell and engine over the passes: the median and the best pass (this machine is shared; a pass
        # that others' work slowed shows in the others' CPU column).
        cells: dict[tuple, dict[str, list[dict]]] = {}
        for r in cons:
            cells.setdefault((condition(r), r["request"], r["concurrency"]), {}).setdefault(r["engine"], []).append(r)
        print("| request | concurrency | worker tok/s, median (best) | llama-server tok/s, median (best) "
              "| worker / llama-server, median (best) | s per answer, worker / llama-server (best passes) "
              "| TTFT ms, worker / llama-server (medians) | ms per output token, worker / llama-server (medians) |")
        print("|---|---|---|---|---|---|---|---|")
        for (cond, request, c), engines in sorted(cells.items(), key=lambda kv: (kv[0][0] != "quiet", kv[0][0], order[kv[0][1]], kv[0][2])):
            req = label(request, cond)
            w, l = engines.get("worker"), engines.get("llama-server")
            if not w or not l:
                continue
            wm, lm = statistics.median(x["tokens_per_s"] for x in w), statistics.median(x["tokens_per_s"] for x in l)
            wb, lb = max(w, key=lambda x: x["tokens_per_s"]), max(l, key=lambda x: x["tokens_per_s"])
            print(f"| {req} | {c} | {wm:.1f} ({wb['tokens_per_s']:.1f}) | {lm:.1f} ({lb['tokens_per_s']:.1f}) "
                  f"| {wm / lm:.2f}× ({wb['tokens_per_s'] / lb['tokens_per_s']:.2f}×) "
                  f"| {wb['mean_request_s']:.2f} / {lb['mean_request_s']:.2f} "
                  f"| {fmt(summarise(w, 'mean_ttft_ms', statistics.median))} / {fmt(summarise(l, 'mean_ttft_ms', statistics.median))} "
                  f"| {fmt(summarise(w, 'mean_tpot_ms', statistics.median), 2)} / {fmt(summarise(l, 'mean_tpot_ms', statistics.median), 2)} |")
        print()
    ev = sorted((r for r in runs if r.get("kind") == "evicted"), key=lambda r: (r["pass"], r["engine"] != "worker"))
    if ev:
        print("| engine | pass | prompt tokens | cold s | warm s (2nd–6th) | evicted s | TTFT ms cold / warm / evicted "
              "| evicted: cached tokens | valid |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in ev:
            print(f"| {r['engine']} | {r['pass']} | {fmt(r['prompt_tokens'], 0)} | {fmt(r['cold_s'], 2)} | {fmt(r['warm_s'], 2)} "
                  f"| **{fmt(r['evicted_s'], 2)}** | {fmt(r['cold_ttft_ms'], 0)} / {fmt(r['warm_ttft_ms'], 0)} / {fmt(r['evicted_ttft_ms'], 0)} "
                  f"| {fmt(r['evicted_cached_tokens'], 0)} | {r['valid']}/{r['requests']} |")
        print()
    loads = sorted((r for r in runs if r.get("kind") == "load"), key=lambda r: r.get("seq", 0))
    if loads:
        print("| target | load | sent | completed | other outcomes | req/s | p50 ms | p99 ms | max ms "
              "| CPU ms/request | reconciliation |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in loads:
            s = r["result"].get("summary") or r["result"]
            lat = s.get("latency") or {}
            others = {k: v for k, v in (s.get("outcomes") or {}).items() if k != "completed" and v}
            errs = s.get("errors") or {}
            other = ", ".join(f"{v} {k}" for k, v in others.items()) or "—"
            if errs:
                other += " (" + ", ".join(f"{v}× {k}" for k, v in errs.items()) + ")"
            rec = r["result"].get("reconciliation")
            if rec is None:
                rec_text = "—"
            else:
                n_disc = len(rec.get("discrepancies") or [])
                records = (rec.get("totals") or {}).get("records", 0)
                rec_text = f"passed, {records:,} records" if n_disc == 0 else f"**failed**: {n_disc:,} discrepancies"
            cpu_text = " + ".join(f"{name} {ms:.2f}" for name, ms in r.get("cpu_ms_per_request", {}).items()) or "—"
            print(f"| {r['target']} | {r['load']} | {s.get('sent', 0):,} | {s.get('completed', 0):,} | {other} "
                  f"| {s.get('completed_per_s', 0):,.0f} | {fmt(lat.get('p50_ms'), 2)} | {fmt(lat.get('p99_ms'), 2)} "
                  f"| {fmt(lat.get('max_ms'), 1)} | {cpu_text} | {rec_text} |")
        print()
        # Added latency: each target against the mock directly at the same open-loop rate.
        direct = {r["load"]: r for r in loads if r["target"] == "mock directly"}
        rows = []
        def first_token(summary: dict) -> dict:
            kinds = summary.get("kinds") or summary.get("by_kind") or {}
            return next((k.get("first_token") for k in kinds.values() if isinstance(k, dict) and k.get("first_token")), None) or {}

        for r in loads:
            comparable = r["load"].startswith("open") or " 1 client" in r["load"]
            if r["target"] == "mock directly" or r["load"] not in direct or not comparable:
                continue
            sa = r["result"].get("summary") or r["result"]
            sb = direct[r["load"]]["result"].get("summary") or direct[r["load"]]["result"]
            a, b = sa.get("latency") or {}, sb.get("latency") or {}
            fa, fb = first_token(sa), first_token(sb)
            ttft = f"{fa['p50_ms'] - fb['p50_ms']:.2f} / {fa['p99_ms'] - fb['p99_ms']:.2f}" if fa and fb else "—"
            if a and b:
                rows.append(f"| {r['target']} | {r['load']} | {a['p50_ms'] - b['p50_ms']:.2f} | {a['p99_ms'] - b['p99_ms']:.2f} | {ttft} |")
        if rows:
            print("| target | load | added p50 ms | added p99 ms | added first token p50 / p99 ms |")
            print("|---|---|---|---|---|")
            print("\n".join(rows))
            print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("constrained")
    c.add_argument("--url", required=True)
    c.add_argument("--engine", required=True)
    c.add_argument("--pass-no", type=int, default=1)
    c.add_argument("--first", type=int, default=0, help="number of the first request (varies the prompts)")
    c.add_argument("--request", choices=sorted(REQUESTS), required=True)
    c.add_argument("--concurrency", type=int, default=1)
    c.add_argument("--rounds", type=int, default=1)
    c.add_argument("--max-tokens", type=int, default=64)
    c.add_argument("--timeout", type=float, default=600)
    c.add_argument("--out", required=True)
    c.add_argument("--condition", default="quiet", help="what else ran on the machine (a label for the report)")
    c.add_argument("--pid", type=int, help="the engine's process, to tell its CPU from everything else's")
    e = sub.add_parser("evicted")
    e.add_argument("--url", required=True)
    e.add_argument("--engine", required=True)
    e.add_argument("--pass-no", type=int, default=1)
    e.add_argument("--first", type=int, default=0, help="number of the first request (varies the prompts)")
    e.add_argument("--max-tokens", type=int, default=64)
    e.add_argument("--timeout", type=float, default=600)
    e.add_argument("--out", required=True)
    p = sub.add_parser("cpu")
    p.add_argument("pids", nargs="+")
    q = sub.add_parser("wait-quiet")
    q.add_argument("--below", type=float, default=0.3)
    q.add_argument("--window-s", type=float, default=5)
    q.add_argument("--max-s", type=float, default=600)
    r = sub.add_parser("report")
    r.add_argument("dir")
    args = parser.parse_args()
    {"constrained": constrained, "evicted": evicted, "cpu": cpu, "wait-quiet": wait_quiet, "report": report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
