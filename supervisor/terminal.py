"""The one way text reaches a terminal. Whatever gaffer shows may come from an untrusted
party: model text, tool arguments and output, log fields, file and repository names, MCP
commands, trust items. A control character in any of them (an escape sequence that moves
the cursor, erases a line, sets the clipboard or the title) is shown as `\\x1b`, never
sent, and so is a format character (zero-width, bidirectional, a tag) that would hide or
reorder text. Every console gaffer prints through is a `SafeConsole`, and every plain line
goes through `echo`; rich's own styling is added after the text is made safe. A field
shown inside a line of gaffer's own (a name, key, path or command in the trust review or
the approval prompt) goes through `one_line`, so its newlines cannot forge lines below.
The timeline page uses the same functions.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import IO, Any

import click
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

# C0 controls but tab and newline, DEL, and C1 controls: the ASCII and Latin-1 part of
# what is written out, matched without a per-character look-up.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Every other character that is not printable ASCII: each is looked up (`_written_if_hidden`), since
# a hand list of format characters goes stale with every Unicode version.
_OTHER = re.compile("[^\t\n\x20-\x7e]")
# Controls, format characters (zero-width, bidirectional marks and isolates, the soft
# hyphen, tag characters), lone surrogates (bytes that were not UTF-8) and the line and
# paragraph separators: none draws anything, and each can reorder, hide or break a line.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Letters that draw as blank space (Hangul fillers), used to forge a blank name.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
_BLANK_LETTER = re.compile(f"[{''.join(sorted(_BLANK_LETTERS))}]")
# Spaces past this many in a row, in a one-line field, are counted: a name padded to the
# terminal's width wraps into lines that look like gaffer's own.
MAX_SPACES_SHOWN = 8
_SPACE_RUN = re.compile(f" {{{MAX_SPACES_SHOWN + 1},}}")
# Blanks other than the plain space: separators of other widths and the braille blank.
_ODD_BLANK = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u2800]")
# What a one-line field writes out besides: its own line breaks and tabs.
_LINE_BREAKS = str.maketrans({"\n": "\\n", "\t": "\\t"})


def visible(text: str) -> str:
    """`text` with every control and format character written out (`\\x1b`, `\\u202e`);
    tabs and newlines pass."""
    if text.isascii():
        return _CONTROL.sub(_written, text)
    # Most text hides nothing: Python's printable excludes every hidden category (and
    # spaces but ASCII's), so the look-up per character runs only where it may find one.
    spaced = text.replace("\n", " ").replace("\t", " ")
    if spaced.isprintable() and not _BLANK_LETTER.search(text):
        return text
    return _OTHER.sub(_written_if_hidden, text)


def one_line(text: str, limit: int | None = None) -> str:
    """`text` made visible and kept on one line: a name, key, path or command shown in a
    line of gaffer's own, whose newlines could otherwise push real lines out of view. A
    line can also be pushed by wrapping, so a run of spaces is counted, not sent, and a
    blank of another kind (U+3000, U+2800) is written out; `limit` cuts a name there."""
    shown = _ODD_BLANK.sub(_written, visible(text).translate(_LINE_BREAKS))
    shown = _SPACE_RUN.sub(lambda run: f"[{len(run.group())} spaces]", shown)
    if limit is not None and len(shown) > limit:
        return f"{shown[:limit]}… ({len(shown) - limit} more characters)"
    return shown


def _written_if_hidden(match: re.Match[str]) -> str:
    char = match.group()
    if char in _BLANK_LETTERS or unicodedata.category(char) in _HIDDEN_CATEGORIES:
        return _written(match)
    return char


def _written(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


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
