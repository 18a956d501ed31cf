"""The Batch API benchmark's driver (scripts/bench-batch.sh starts the stack and calls it).

Three phases against one gateway and one worker, every request an invoice extraction (json_schema):

  best     BENCH_CLIENTS (8) clients send the batch's own lines (taken from all over it) online, back to
           back, for BENCH_SECONDS:
           the worker's best aggregate completion tokens/s (no batch running);
  alone    one client sends BENCH_PROBES online invoice requests, one after another: their p50 latency;
  batch    a BENCH_LINES-line batch through /v1/files and /v1/batches, while one client sends the same
           online probes (one every BENCH_PROBE_GAP_S, 5 s): the batch's completion tokens/s (its lines'
           usage ÷ in_progress_at to completed_at) and the probes' p50 latency beside it.

A fourth phase, `same` (not run by default), sends the batch's first BENCH_SAME (40) lines again online,
one at a time, and counts the answers that match the batch's.

Prints a JSON report; stdlib only.
"""

import json
import os
import statistics
import sys
import threading
import time
import urllib.request
import uuid

BASE = os.environ["BENCH_GATEWAY"]
KEY = os.environ["BENCH_KEY"]
MODEL = "smollm2-135m-instruct"
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "8"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "90"))
PROBES = int(os.environ.get("BENCH_PROBES", "20"))
LINES = int(os.environ.get("BENCH_LINES", "2000"))
PROBE_GAP_S = float(os.environ.get("BENCH_PROBE_GAP_S", "5"))
# "0": the batch runs with no online request beside it.
BESIDE = os.environ.get("BENCH_BESIDE", "1") != "0"
# "name:pid ..." of the processes whose CPU time each phase reports (the worker, the gateway).
PIDS = [tuple(item.split(":")) for item in os.environ.get("BENCH_PIDS", "").split()]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    """CPU seconds so far of each process in BENCH_PIDS, and of every Postgres process together."""
    def of(pid):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / TICKS
        except OSError:
            return 0.0
    seconds = {name: of(pid) for name, pid in PIDS}
    seconds["postgres"] = sum(of(pid) for pid in os.listdir("/proc") if pid.isdigit() and _comm(pid) == "postgres")
    return seconds


def _comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


def cpu_since(before, elapsed):
    """Each process's share of one core over the phase."""
    now = cpu_seconds()
    return {name: round((now[name] - before.get(name, 0.0)) / max(elapsed, 1e-9), 2) for name in now}

# The worker's own address, for its /metrics (how busy its sequences were, on how many threads).
WORKER = os.environ.get("BENCH_WORKER")
COUNTERS = ("decode_steps_total", "decode_microseconds_total", "prompt_tokens_total", "prompt_cached_tokens_total",
            "completion_tokens_total", "decode_thread_switches_total")
GAUGES = ("slots_busy", "queue_depth", "decode_threads")


def worker_metrics():
    """The worker's counters and gauges named above, by their names without the prefix."""
    if not WORKER:
        return {}
    with urllib.request.urlopen(WORKER + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("runaii_worker_") and " " in line:
            name, value = line.split()[:2]
            name = name[len("runaii_worker_"):]
            if name in COUNTERS or name in GAUGES:
                found[name] = float(value)
    return found


class Watch:
    """Samples the worker's gauges every half second over a phase; `done()` reports them with the
    counters' growth: mean sequences busy, mean queue, share of the time on one thread, decode steps."""

    def __init__(self):
        self.first, self.samples, self.stop = worker_metrics(), [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.wait(0.5):
            try:
                self.samples.append(worker_metrics())
            except OSError:
                pass

    def done(self):
        self.stop.set()
        self.thread.join()
        last = worker_metrics()
        if not last or not self.samples:
            return {}
        grew = {name: last.get(name, 0) - self.first.get(name, 0) for name in COUNTERS}
        mean = lambda name: round(statistics.mean(s.get(name, 0) for s in self.samples), 2)
        steps = max(grew["decode_steps_total"], 1)
        return {"slots_busy_mean": mean("slots_busy"), "queue_depth_mean": mean("queue_depth"),
                "one_thread_share": round(sum(1 for s in self.samples if s.get("decode_threads") == 1) / len(self.samples), 3),
                "thread_switches": int(grew["decode_thread_switches_total"]), "decode_steps": int(steps),
                "decode_ms_per_step": round(grew["decode_microseconds_total"] / steps / 1000, 2),
                "completion_tokens_per_step": round(grew["completion_tokens_total"] / steps, 2),
                "prompt_tokens": int(grew["prompt_tokens_total"]), "prompt_cached_tokens": int(grew["prompt_cached_tokens_total"])}


SCHEMA = {
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
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF"]


def invoice(i):
    text = f"Invoice #A-{1000 + i}, due 2026-{1 + i % 12:02d}-{1 + i % 28:02d}, total {100 + (i * 37) % 900}.{i % 100:02d} {CURRENCIES[i % 5]}."
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Extract the invoice fields."}, {"role": "user", "content": text}],
        "temperature": 0,
        "max_tokens": 80,
        "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "strict": True, "schema": SCHEMA}},
    }


def call(method, path, body=None, content_type="application/json"):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("authorization", f"Bearer {KEY}")
    if data is not None:
        request.add_header("content-type", content_type)
    with urllib.request.urlopen(request, timeout=600) as response:
        return response.read()


def chat(i):
    """One online invoice request: (seconds, completion tokens)."""
    started = time.monotonic()
    answer = json.loads(call("POST", "/v1/chat/completions", invoice(i)))
    return time.monotonic() - started, answer["usage"]["completion_tokens"]


def best():
    tokens = [0] * CLIENTS
    latencies = []
    deadline = time.monotonic() + SECONDS

    def client(c):
        # Lines from all over the batch's range: their answers are as long, on average, as the batch's.
        k = c
        while time.monotonic() < deadline:
            seconds, n = chat(k * 769 % LINES)
            tokens[c] += n
            latencies.append(seconds)
            k += CLIENTS

    started, cpu, watch = time.monotonic(), cpu_seconds(), Watch()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {"clients": CLIENTS, "seconds": round(elapsed, 1), "answers": len(latencies), "completion_tokens": sum(tokens),
            "tokens_per_s": round(sum(tokens) / elapsed, 1), "s_per_answer_p50": round(statistics.median(latencies), 3),
            "cores_used": cpu_since(cpu, elapsed), "worker": watch.done()}


def probes(count, gap_s, stop=None):
    """Online invoice requests one after another: [(seconds, completion tokens)]."""
    answers = []
    for i in range(count if stop is None else 10**9):
        if stop is not None and stop.is_set():
            break
        answers.append(chat(50_000 + i))
        time.sleep(gap_s)
    return answers


def upload(lines):
    boundary = uuid.uuid4().hex
    content = "".join(json.dumps({"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions", "body": invoice(i)}) + "\n"
                      for i in range(lines)).encode()
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"invoices.jsonl\"\r\n"
            f"Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return json.loads(call("POST", "/v1/files", form, f"multipart/form-data; boundary={boundary}"))["id"]


def batch():
    file_id = upload(LINES)
    created = json.loads(call("POST", "/v1/batches", {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}))
    stop = threading.Event()
    probed = []
    # Probes begin once the batch runs and fills the worker.
    while json.loads(call("GET", f"/v1/batches/{created['id']}"))["status"] == "validating":
        time.sleep(0.5)
    time.sleep(5)
    prober = threading.Thread(target=lambda: probed.extend(probes(0, PROBE_GAP_S, stop)))
    if BESIDE:
        prober.start()
    started, cpu, watch = time.monotonic(), cpu_seconds(), Watch()
    while True:
        state = json.loads(call("GET", f"/v1/batches/{created['id']}"))
        if state["status"] in ("completed", "failed", "expired", "cancelled"):
            break
        time.sleep(2)
    stop.set()
    cores, worker = cpu_since(cpu, time.monotonic() - started), watch.done()
    if BESIDE:
        prober.join()
    output = call("GET", f"/v1/files/{state['output_file_id']}/content").decode().splitlines() if state.get("output_file_id") else []
    ANSWERS.update((answer["custom_id"], answer["response"]["body"]) for answer in map(json.loads, output))
    tokens = sum(body["usage"]["completion_tokens"] for body in ANSWERS.values())
    elapsed = state["completed_at"] - state["in_progress_at"]
    probe_tokens = sum(n for _, n in probed)
    return {"status": state["status"], "request_counts": state["request_counts"], "seconds": elapsed, "completion_tokens": tokens,
            "tokens_per_s": round(tokens / max(elapsed, 1), 1), "s_per_line": round(elapsed / max(LINES, 1), 3),
            "cost": state.get("usage", {}).get("cost"),
            "probes": len(probed), "probe_s_p50": round(statistics.median(s for s, _ in probed), 3) if probed else None,
            "with_probes_tokens_per_s": round((tokens + probe_tokens) / max(elapsed, 1), 1), "cores_used": cores, "worker": worker}


# The batch's answers by custom_id, for the `same` phase.
ANSWERS = {}


def same(count):
    """The batch's first `count` lines sent again online, one at a time: how many answers match the batch's
    word for word, and the completion tokens of each side."""
    matched, batch_tokens, online_tokens, first_difference = 0, 0, 0, None
    for i in range(count):
        online = json.loads(call("POST", "/v1/chat/completions", invoice(i)))
        batched = ANSWERS[f"line-{i}"]
        pair = {"line": i, "online": online["choices"][0]["message"]["content"], "batch": batched["choices"][0]["message"]["content"]}
        if pair["online"] == pair["batch"]:
            matched += 1
        elif first_difference is None:
            first_difference = pair
        online_tokens += online["usage"]["completion_tokens"]
        batch_tokens += batched["usage"]["completion_tokens"]
    return {"lines": count, "same_answer": matched, "batch_completion_tokens": batch_tokens, "online_completion_tokens": online_tokens,
            "first_difference": first_difference}


def main():
    report = {}
    phases = os.environ.get("BENCH_PHASES", "best alone batch").split()
    if "best" in phases:
        report["best"] = best()
        print(json.dumps({"best": report["best"]}), file=sys.stderr)
    if "alone" in phases:
        answers = probes(PROBES, 0.2)
        report["alone"] = {"probes": len(answers), "probe_s_p50": round(statistics.median(s for s, _ in answers), 3)}
        print(json.dumps({"alone": report["alone"]}), file=sys.stderr)
    if "batch" in phases:
        report["batch"] = batch()
    if "same" in phases and ANSWERS:
        report["same"] = same(min(LINES, int(os.environ.get("BENCH_SAME", "40"))))
    if {"best", "batch"} <= set(report):
        report["batch_share_of_best"] = round(report["batch"]["tokens_per_s"] / report["best"]["tokens_per_s"], 3)
        report["with_probes_share_of_best"] = round(report["batch"]["with_probes_tokens_per_s"] / report["best"]["tokens_per_s"], 3)
    if {"alone", "batch"} <= set(report) and report["batch"]["probe_s_p50"]:
        report["online_p50_ratio"] = round(report["batch"]["probe_s_p50"] / report["alone"]["probe_s_p50"], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
