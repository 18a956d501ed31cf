"""A private runaii stack for tests that drive the real binaries from Python (tests/sdk, tests/console).

`start_stack` brings one up: a fresh Postgres database on the DATABASE_URL server (default
postgres://postgres@127.0.0.1:5432/postgres, used as admin), migrated, with the embedded model in the
catalog; a worker and a gateway on free ports (the gateway with an admin JWT secret, so the admin API
and the console's staff sign-in work); a demo tenant key with credit, and a key of a tenant without any.
Leaving the `with` block stops both processes and drops the database.

The binaries come from $CARGO_TARGET_DIR/debug (default ~/.cache/runaii/target/debug): build them first
with `cargo build --locked -p runaii-worker -p runaii-gateway` (scripts/test.sh does).

Nothing here imports a test framework's plugins or an SDK: each suite's conftest makes its fixtures from it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m-instruct"
MODEL_FILE = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DB_PREFIX = "runaii_sdk_"
# Databases a crashed session left behind are dropped once they are this old.
STALE_DB_SECONDS = 3600


class StackUnavailable(RuntimeError):
    """A binary or the model is missing: the suite cannot run (not a test failure)."""


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR") or Path.home() / ".cache" / "runaii" / "target")


def binary(name: str) -> Path:
    path = target_dir() / "debug" / name
    if not path.exists():
        raise StackUnavailable(
            f"{path} is missing: build it with `cargo build --locked -p runaii-worker -p runaii-gateway`"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the test process goes away, even by SIGKILL (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def http_status(url: str, timeout: float = 2.0) -> int:
    """Status of GET url; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return 0


def with_database(url: str, name: str) -> str:
    """The same server URL with another database name."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def psql(url: str, sql: str) -> str:
    result = subprocess.run(
        ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise RuntimeError(f"psql failed ({sql}): {result.stderr.strip()}")
    return result.stdout


@dataclasses.dataclass
class Stack:
    base_url: str  # the gateway, e.g. http://127.0.0.1:40123 (the OpenAI base URL is base_url + "/v1")
    api_key: str
    broke_api_key: str  # a key of a tenant with no credit
    model: str
    database_url: str
    redis_url: str
    worker_url: str
    logs: Path
    admin_jwt_secret: str
    gateway_bin: Path
    env: dict[str, str]
    processes: list[subprocess.Popen] = dataclasses.field(default_factory=list)

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def openai(self, **kwargs):
        """An OpenAI client on this stack; kwargs override the defaults (api_key, max_retries, ...)."""
        import openai  # only the SDK suite has it installed

        options = {"base_url": self.v1, "api_key": self.api_key, "max_retries": 0, "timeout": 300.0}
        options.update(kwargs)
        return openai.OpenAI(**options)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def cli(self, *args: str) -> str:
        """Runs a gateway subcommand against this stack's database; its last stdout line."""
        return _cli(self.gateway_bin, self.env, *args)

    def create_key(self, tenant: str, name: str = "test") -> str:
        """A new key of `tenant` (created when missing)."""
        return self.cli("create-key", "--tenant", tenant, "--name", name)

    def grant(self, tenant: str, amount: str) -> None:
        self.cli("grant-credits", "--tenant", tenant, "--amount", amount)

    def admin_token(self, roles: list[str], tenant_id: str | None = None, subject: str = "tester") -> str:
        """An admin JWT signed with this stack's secret, by the gateway's own `issue-admin-token`."""
        args = ["issue-admin-token", "--subject", subject, "--roles", ",".join(roles), "--ttl-hours", "2"]
        if tenant_id:
            args += ["--tenant-id", tenant_id]
        return self.cli(*args)

    def tenant_id(self, name: str) -> str:
        return psql(self.database_url, f"SELECT id FROM tenants WHERE name = '{name}'").strip()

    def chat(self, api_key: str, body: dict) -> tuple[int, dict, str]:
        """POST /v1/chat/completions: status, JSON body, x-request-id."""
        request = urllib.request.Request(
            f"{self.v1}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as r:
                return r.status, json.load(r), r.headers.get("x-request-id", "")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}"), e.headers.get("x-request-id", "")

    def get_json(self, path: str, token: str | None = None) -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with urllib.request.urlopen(urllib.request.Request(f"{self.base_url}{path}", headers=headers), timeout=30) as r:
            return json.load(r)


class _Starter:
    """Starts processes for the stack and remembers them for teardown."""

    def __init__(self, logs: Path, env: dict[str, str]):
        self.logs = logs
        self.env = env
        self.processes: list[subprocess.Popen] = []

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "wb")
        process = subprocess.Popen(
            args,
            cwd=REPO,
            env=self.env,
            stdin=subprocess.PIPE,  # the worker exits when this closes (--exit-on-stdin-eof)
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        log.close()
        self.processes.append(process)
        return process

    def wait_for(self, name: str, process: subprocess.Popen, url: str, ok, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            if ok(http_status(url)):
                return
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready at {url} after {seconds:.0f} s:\n{self.tail(name)}")
            time.sleep(0.2)

    def tail(self, name: str) -> str:
        return "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-30:])

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                try:
                    process.stdin.close()
                except OSError:
                    pass
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _drop_stale_databases(admin_url: str) -> None:
    now = int(time.time())
    names = psql(admin_url, f"SELECT datname FROM pg_database WHERE datname LIKE '{DB_PREFIX}%'").split()
    for name in names:
        try:
            created = int(name[len(DB_PREFIX) :].split("_")[0])
        except ValueError:
            continue
        if now - created > STALE_DB_SECONDS:
            psql(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _cli(gateway: Path, env: dict[str, str], *args: str) -> str:
    """Runs a gateway subcommand; its last stdout line (log lines would go to stdout too)."""
    result = subprocess.run(
        [str(gateway), *args], env={**env, "RUST_LOG": "error"}, capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise RuntimeError(f"runaii-gateway {' '.join(args)} failed: {result.stderr or result.stdout}")
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if lines else ""


@contextlib.contextmanager
def start_stack(logs: Path) -> Iterator[Stack]:
    worker_bin, gateway_bin = binary("runaii-worker"), binary("runaii-gateway")
    if not MODEL_FILE.exists():
        raise StackUnavailable(f"{MODEL_FILE} is missing: run scripts/fetch-model.sh")

    admin_url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"
    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379"
    _drop_stale_databases(admin_url)
    db_name = f"{DB_PREFIX}{int(time.time())}_{secrets.token_hex(4)}"
    psql(admin_url, f'CREATE DATABASE "{db_name}"')
    database_url = with_database(admin_url, db_name)

    admin_jwt_secret = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAII_")}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        RUST_LOG=os.environ.get("RUST_LOG", "warn"),
        NO_COLOR="1",
        RUNAII_PROBE_MS="300",
        # The credential gateway and worker share (workers refuse inference without it).
        RUNAII_WORKER_SECRET=secrets.token_hex(32),
        # The admin API's HS256 secret: staff tokens are issued with it by `issue-admin-token`.
        RUNAII_ADMIN_JWT_SECRET=admin_jwt_secret,
    )
    starter = _Starter(logs, env)
    try:
        worker_port, gateway_port = free_port(), free_port()
        worker_url = f"http://127.0.0.1:{worker_port}"
        base_url = f"http://127.0.0.1:{gateway_port}"

        _cli(gateway_bin, env, "migrate")
        _cli(
            gateway_bin, env, "upsert-model", "--id", MODEL, "--context-length", "4096",
            "--input-price", "0.10", "--output-price", "0.30", "--worker-url", worker_url, "--supports-tools", "true",
        )  # fmt: skip
        api_key = _cli(gateway_bin, env, "create-key", "--tenant", "sdk-demo", "--name", "sdk-tests")
        assert api_key.startswith("rk-"), f"create-key printed {api_key!r}"
        _cli(gateway_bin, env, "grant-credits", "--tenant", "sdk-demo", "--amount", "100")
        broke_api_key = _cli(gateway_bin, env, "create-key", "--tenant", "sdk-broke", "--name", "no-credit")

        worker = starter.spawn(
            "worker",
            [str(worker_bin), "--model-path", str(MODEL_FILE), "--model-id", MODEL,
             "--listen", f"127.0.0.1:{worker_port}", "--exit-on-stdin-eof"],
        )  # fmt: skip
        gateway = starter.spawn("gateway", [str(gateway_bin), "serve", "--listen", f"127.0.0.1:{gateway_port}"])
        starter.wait_for("worker", worker, f"{worker_url}/health", lambda s: s == 200, 180)
        starter.wait_for("gateway", gateway, f"{base_url}/health", lambda s: s == 200, 60)
        # The gateway probes its workers every RUNAII_PROBE_MS: wait until it routes to ours.
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/v1/models/{MODEL}", timeout=2) as r:
                    if json.load(r).get("is_ready"):
                        break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the gateway never saw the worker ready:\n{starter.tail('gateway')}")
            time.sleep(0.2)

        yield Stack(
            base_url=base_url,
            api_key=api_key,
            broke_api_key=broke_api_key,
            model=MODEL,
            database_url=database_url,
            redis_url=redis_url,
            worker_url=worker_url,
            logs=logs,
            admin_jwt_secret=admin_jwt_secret,
            gateway_bin=gateway_bin,
            env=env,
            processes=starter.processes,
        )
    finally:
        starter.stop_all()
        try:
            psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        except RuntimeError as e:
            print(f"could not drop {db_name}: {e}")
