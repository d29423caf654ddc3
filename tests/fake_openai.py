"""A real HTTP server on 127.0.0.1 speaking the Chat Completions wire protocol.

Each request takes the next scripted reply: a normal answer (streamed when the client
asks for a stream), an HTTP error with headers, or a stream that breaks midway.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workers.model.openai_client import OpenAIModel


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    """(name, raw JSON arguments) per call."""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    """With status 200 and a stream: sent as an `error` event in the stream, as llama.cpp
    does when it cannot read the model's reply."""
    cut_after_chunks: int | None = None
    """Close the connection mid-body after this many content chunks."""
    no_finish: bool = False
    """End the stream cleanly but never send a finish_reason."""
    delay: float = 0.0
    keep_alive_for: float = 0.0
    """Before the first chunk, send SSE comments (`: keep-alive`) every half second for
    this long: a server that is alive but says nothing."""
    drip_s: float = 0.0
    """Pause this long between chunks: a stream that trickles."""
    chunk_size: int = 4
    prompt_tokens: int = 12
    completion_tokens: int = 7
    cached_tokens: int | None = None
    """Prompt tokens the server says it had cached, as llama.cpp and OpenAI report them."""
    timings: Any = None
    """What llama.cpp's server sends beside the usage: its own time reading the prompt
    and writing the reply (`{"prompt_ms": …, "predicted_ms": …}`); None for none."""
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    """On the Responses API: reasoning items output before the reply."""
    reasoning_tokens: int | None = None
    cut_at_limit: bool = False
    """Finish as a reply the output limit cut off: `finish_reason: length`, or on the
    Responses API an `incomplete` response (max_output_tokens)."""


def _first_user_text(body: dict[str, Any]) -> str:
    """The first user message of a Chat Completions or a Responses request."""
    for message in body.get("messages") or body.get("input") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content"))
    return ""


def error_reply(status: int, message: str, code: str | None = None, **headers: str) -> Reply:
    return Reply(
        status=status, error={"message": message, "type": "error", "code": code}, headers=headers
    )


class FakeOpenAI:
    def __init__(
        self, replies: list[Reply] | None = None, routes: dict[str, list[Reply]] | None = None
    ) -> None:
        self.replies = list(replies or [])
        self.routes = {key: list(script) for key, script in (routes or {}).items()}
        """Replies for the agents whose first user message (a worker's task) starts with
        the key, in order, whatever order parallel workers ask in; `replies` for the rest."""
        self.requests: list[dict[str, Any]] = []
        self.request_times: list[float] = []
        self.paths: list[str] = []
        """Each request's path: which API it spoke."""
        self.headers: list[dict[str, str]] = []
        """Each request's HTTP headers, names in lower case."""
        self.disconnects: list[float] = []
        """When a client hung up while its reply was being computed (a `delay`)."""
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.request_times.append(time.monotonic())
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fake.paths.append(self.path)
                    reply = fake._next(body)
                if reply.delay and not self._wait_for_client(reply.delay):
                    with fake._lock:
                        fake.disconnects.append(time.monotonic())
                    return
                if reply.status != 200:
                    self._json(
                        reply.status, {"error": reply.error or {"message": "error"}}, reply.headers
                    )
                elif self.path.endswith("/responses"):
                    if body.get("stream"):
                        self._stream(reply, body, _response_events(reply, body))
                    else:
                        self._json(200, _response(reply, body), reply.headers)
                elif body.get("stream"):
                    self._stream(reply, body)
                else:
                    self._json(200, _completion(reply, body), reply.headers)

            def _wait_for_client(self, seconds: float) -> bool:
                """Sleep as a slow server computes, but notice a client that hangs up,
                as llama.cpp's server does: False when it left."""
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.02)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                return True

            def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(
                self, reply: Reply, body: dict[str, Any], events: list[str] | None = None
            ) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if events is None:
                    events = (
                        _chunks(reply, body)
                        if reply.error is None
                        else [json.dumps({"error": reply.error})]
                    )
                started = time.monotonic()
                try:
                    while time.monotonic() - started < reply.keep_alive_for:
                        self._write_chunk(b": keep-alive\n\n")
                        time.sleep(0.5)
                    for n, event in enumerate(events):
                        if n and reply.drip_s:
                            time.sleep(reply.drip_s)
                        if not self._event(reply, n, event):
                            return
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client left
                    return

            def _write_chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _event(self, reply: Reply, n: int, event: str) -> bool:
                """Send one event; False when the reply cuts the connection here."""
                if reply.cut_after_chunks is not None and n >= reply.cut_after_chunks:
                    # Half a chunk, then a dead socket: what a dropped connection looks like.
                    self.wfile.write(b'40\r\ndata: {"trunc')
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return False
                self._write_chunk(f"data: {event}\n\n".encode())
                return True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def _next(self, body: dict[str, Any]) -> Reply:
        task = _first_user_text(body)
        for key, script in self.routes.items():
            if task.startswith(key) and script:
                return script.pop(0)
        return self.replies.pop(0) if self.replies else Reply(text="(no reply scripted)")

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish(reply),
            }
        ],
        "usage": _usage(reply),
        **_timings(reply),
    }


def _timings(reply: Reply) -> dict[str, Any]:
    return {} if reply.timings is None else {"timings": reply.timings}


def _finish(reply: Reply) -> str:
    return "length" if reply.cut_at_limit else "tool_calls" if reply.tool_calls else "stop"


def _usage(reply: Reply) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


def _chunks(reply: Reply, body: dict[str, Any]) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    events = [chunk({"role": "assistant", "content": ""})]
    text, size = reply.text, reply.chunk_size
    events += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    for index, (name, args) in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [head]}))
        for i in range(0, len(args), size):
            part = {"index": index, "function": {"arguments": args[i : i + size]}}
            events.append(chunk({"tool_calls": [part]}))
    if not reply.no_finish:
        events.append(chunk({}, _finish(reply)))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(
                json.dumps(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [],
                        "usage": _usage(reply),
                        **_timings(reply),
                    }
                )
            )
    events.append("[DONE]")
    return events


# -- the Responses API ----------------------------------------------------------------


def _response(reply: Reply, body: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = [*reply.reasoning]
    if reply.text:
        output.append(
            {
                "type": "message",
                "id": "msg_0",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for index, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{index}",
                "call_id": f"call_{index}",
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    usage = {
        "input_tokens": reply.prompt_tokens,
        "output_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens or 0},
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens or 0},
    }
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 0,
        "model": body.get("model", "fake"),
        "status": status,
        "output": output,
        "usage": usage,
    }


def _response_events(reply: Reply, body: dict[str, Any]) -> list[str]:
    """A streamed response: created, the text in deltas, then completed (unless the
    reply never finishes, or fails)."""
    events = [
        json.dumps(
            {"type": "response.created", "response": _response(Reply(), body, "in_progress")}
        )
    ]
    text, size = reply.text, reply.chunk_size
    for i in range(0, len(text), size):
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_0",
            "delta": text[i : i + size],
        }
        events.append(
            json.dumps({**delta, "output_index": len(reply.reasoning), "content_index": 0})
        )
    if reply.error is not None:
        failed = {**_response(reply, body, "failed"), "error": reply.error}
        events.append(json.dumps({"type": "response.failed", "response": failed}))
    elif reply.cut_at_limit:
        cut = {
            **_response(reply, body, "incomplete"),
            "incomplete_details": {"reason": "max_output_tokens"},
        }
        events.append(json.dumps({"type": "response.incomplete", "response": cut}))
    elif not reply.no_finish:
        events.append(
            json.dumps({"type": "response.completed", "response": _response(reply, body)})
        )
    return events


def prefilled_model(server: FakeOpenAI, **settings: Any) -> OpenAIModel:
    """A client of `server` whose required calls are begun for the model as the bundled
    model's are: a fenced JSON block, naming the tool when one is offered."""
    return OpenAIModel(
        model="m",
        base_url=server.base_url,
        api_key="k",
        tool_prefill="```json\n",
        tool_name_prefill='{"name": "{name}", "arguments": {',
        **settings,
    )
