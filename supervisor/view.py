"""The terminal view: a subscriber that turns events into lines on stderr (rich)."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.text import Text

from workers.events import Record


def stderr_console() -> Console:
    # rich drops colour by itself when stderr is not a TTY or NO_COLOR is set.
    return Console(stderr=True, highlight=False, soft_wrap=True)


class TerminalView:
    """Streams the model's text and prints one line per tool call, retry and stop."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or stderr_console()
        self._lock = threading.Lock()
        self._mid_line = False

    def __call__(self, record: Record) -> None:
        with self._lock:
            handler = getattr(self, "_on_" + record["event"], None)
            if handler is not None:
                handler(record)

    def _write(self, text: Text | str, *, newline: bool = True) -> None:
        if newline and self._mid_line:
            self.console.print()
            self._mid_line = False
        self.console.print(text, end="\n" if newline else "", markup=False)

    def _on_text_delta(self, record: Record) -> None:
        text: str = record["text"]
        self._write(text, newline=False)
        if text:
            self._mid_line = not text.endswith("\n")

    def _on_tool_call(self, record: Record) -> None:
        line = Text(f"[step {record['step']}] ", style="dim")
        line.append(record["name"], style="bold cyan")
        if record.get("label"):
            line.append(f" {record['label']}")
        line.append(" → ", style="dim")
        line.append(record.get("summary") or "done", style="red" if record["is_error"] else "green")
        self._write(line)

    def _on_llm_retry(self, record: Record) -> None:
        self._write(
            Text(
                f"[step {record['step']}] model call failed (attempt {record['attempt']}: "
                f"{record['error']}); retrying in {record['wait_s']:.1f}s",
                style="yellow",
            )
        )

    def _on_limit(self, record: Record) -> None:
        self._write(
            Text(f"stopped: {record['limit']} limit: {record['detail']}", style="bold yellow")
        )

    def _on_agent_end(self, record: Record) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False
