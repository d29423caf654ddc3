"""The one way text reaches a terminal. Whatever gaffer shows may come from an untrusted
party: model text, tool arguments and output, log fields, file and repository names, MCP
commands, trust items. A control character in any of them (an escape sequence that moves
the cursor, erases a line, sets the clipboard or the title) is shown as `\\x1b`, never
sent. Every console gaffer prints through is a `SafeConsole`, and every plain line goes
through `echo`; rich's own styling is added after the text is made safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import IO, Any

import click
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

# C0 controls but tab and newline, DEL, C1 controls, the marks that reorder or hide text
# (bidirectional overrides and isolates, line and paragraph separators), and the lone
# surrogates that stand for bytes that were not UTF-8 (written back, some are C1 bytes).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\udc80-\udcff]"
)


def visible(text: str) -> str:
    """`text` with every control character written out (`\\x1b`, `\\u202e`)."""
    return _CONTROL.sub(_written, text)


def _written(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class SafeConsole(Console):
    """A rich console that makes the text of every segment visible before styling it; its
    own control segments (a live footer's cursor moves) pass as they are."""

    def render_str(self, text: str, **options: Any) -> Text:
        # Before rich drops what it strips itself (a carriage return), so that shows too.
        return super().render_str(visible(text), **options)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(visible(segment.text), segment.style)
            for segment in buffer
        )


def console(**options: Any) -> SafeConsole:
    """A console for gaffer's output: no markup or highlighting guessed from the text."""
    options.setdefault("highlight", False)
    return SafeConsole(**options)


def echo(
    message: str = "", *, err: bool = False, nl: bool = True, file: IO[str] | None = None
) -> None:
    """One plain line, made visible."""
    click.echo(visible(message), err=err, nl=nl, file=file)


def confirm(question: str, default: bool = False, *, err: bool = False) -> bool:
    """Asked on stdout, or on stderr (`err`) where stdout is the run's answer."""
    return click.confirm(visible(question), default=default, err=err)
