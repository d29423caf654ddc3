"""Serving the local model: llama.cpp's server (through xllamacpp) on a free 127.0.0.1 port.

`gaffer run` with no endpoint starts one for the run and stops it at exit, unless
`gaffer local start` left one running; `gaffer local stop` ends that one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from supervisor.local.store import QWEN_CODER_1_5B, ModelFile, cache_dir, model_path
from workers import host_programs
from workers.processes import process_alive

HEALTH_TIMEOUT_S = 180.0
# One request at a time, in a 16k-token slot. On two cores a prompt token costs about
# 50 ms whether one request or two are in hand, so two slots only share the work out;
# and workers' prompts share a long prefix (instructions, tools, the workspace at a
# glance) that one slot keeps and the next request reuses, where a second slot computes
# it again: three calls sharing a 2,700-token prefix took 285 s sent together to two
# slots (each computed it), and 3 to 5 s each once a slot had it.
SLOTS = 1
CONTEXT_PER_SLOT = 16384
THREADS = 2
MIN_FREE_MEMORY = 3 * 2**30
# How the chat template has the model open a tool call (qwen2.5-fenced-json.jinja): the
# server turns a reply begun with it into a tool call, which is how one is required.
TOOL_CALL_OPENING = "```json\n"
# Its name, when only one tool is offered: asked for a delegate call with tasks, the
# model otherwise writes {"tasks": [{"profile": ..., "task": ...}]}, no call at all.
NAMED_CALL_OPENING = '{"name": "{name}", "arguments": {'
# And how an answer is begun when tools are off: this model otherwise writes a call as
# text even then. The server returns the opening as part of the answer. It ends with its
# line: ended at the colon, the model's next token (":\n" is one) is cut in two, and it
# stopped there, the answer empty, on the demo's explorer and the bench's readers alike
# (asked the demo's paused reply, "From what I found:" gave 1 token, with "\n" 96).
ANSWER_OPENING = "From what I found:\n"
# How a call after bad replies is sampled besides its raised temperature (llama.cpp's
# server takes these as request fields): a mild penalty on repeated tokens, and DRY
# against repeated runs longer than four tokens (code repeats short ones: indentation,
# `self.`), which stops a loop on one phrase before it starts.
VARIED_SAMPLING = {"repeat_penalty": 1.1, "dry_multiplier": 0.8, "dry_allowed_length": 4}


class LocalUnavailable(Exception):
    """This machine cannot run the local model; the message says why in one line."""


@dataclass(frozen=True)
class Running:
    pid: int
    port: int
    model: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def state_file() -> Path:
    return cache_dir().parent / "local-server.json"


def check_machine() -> None:
    """Refuse early, in one line, where the model cannot run."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError as error:
        raise LocalUnavailable(
            "the local model needs the xllamacpp package; run `make install`"
        ) from error
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if os.uname().machine == "x86_64" and flags and " avx2" not in flags:
        raise LocalUnavailable(
            "this CPU lacks AVX2, which the prebuilt llama.cpp needs; set OPENAI_BASE_URL to a remote endpoint"
        )
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if available < MIN_FREE_MEMORY:
        raise LocalUnavailable(
            f"the local model needs about 3 GB of free memory; {available // 2**20} MiB are free"
        )


def running() -> Running | None:
    """The server `gaffer local start` left, if it is still alive and healthy."""
    try:
        data = json.loads(state_file().read_text())
        found = Running(int(data["pid"]), int(data["port"]), str(data["model"]))
    except (OSError, ValueError, KeyError):
        return None
    return found if process_alive(found.pid) and healthy(found.port) else None


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def start(
    model: ModelFile = QWEN_CODER_1_5B, *, detach: bool = False
) -> tuple[Running, subprocess.Popen[bytes]]:
    """Start a server for the (already pulled) model and wait until it answers."""
    check_machine()
    port = _free_port()
    log = (cache_dir().parent / "local-server.log").open("ab")
    # GOMP_SPINCOUNT keeps generation fast when the other core is busy.
    env = host_programs.environment(values={"GOMP_SPINCOUNT": "300"})
    proc = host_programs.start(
        host_programs.gaffer_module(
            "supervisor.local.server", str(model_path(model)), str(port), model.name
        ),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        new_session=detach,
    )
    log.close()
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while not healthy(port):
        if proc.poll() is not None:
            raise LocalUnavailable(
                f"the local model server exited with code {proc.returncode}; see {cache_dir().parent / 'local-server.log'}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise LocalUnavailable(
                f"the local model server did not answer within {HEALTH_TIMEOUT_S:.0f}s"
            )
        time.sleep(0.25)
    found = Running(proc.pid, port, model.name)
    if detach:
        state_file().write_text(
            json.dumps({"pid": found.pid, "port": found.port, "model": found.model})
        )
    return found, proc


def stop_running() -> bool:
    found = running()
    state_file().unlink(missing_ok=True)
    if found is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    return True


@contextlib.contextmanager
def for_this_run(model: ModelFile = QWEN_CODER_1_5B) -> Iterator[Running]:
    """The running server, or one started now and stopped when the block ends."""
    found = running()
    if found is not None:
        yield found
        return
    started, proc = start(model)
    try:
        yield started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(path: str, port: int, alias: str) -> None:
    """The server process itself: load the model, listen, wait for SIGTERM."""
    import xllamacpp

    template = Path(__file__).with_name(QWEN_CODER_1_5B.chat_template).read_text()
    params = xllamacpp.CommonParams()
    params.model.path = path
    params.model_alias = {alias}  # a set of names in this llama.cpp
    params.n_parallel = SLOTS
    params.n_ctx = SLOTS * CONTEXT_PER_SLOT
    params.cpuparams.n_threads = THREADS
    params.cpuparams_batch.n_threads = THREADS
    params.use_jinja = True
    params.chat_template = template
    params.port = port
    params.hostnames = ["127.0.0.1"]
    server = xllamacpp.Server(params)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"serving {alias} on {server.listening_address}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
