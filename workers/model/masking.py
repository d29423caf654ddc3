"""Secrets taken out of text in every form a server might echo them in: as sent, reversed,
base64 (standard or URL-safe, inside a longer encoding, as Basic auth or a logged bearer
header carries them), hex, and percent- or JSON-escaped."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

MIN_SECRET_CHARS = 8
"""A shorter secret is not masked: the stand-in key "unused", or a 3-letter password,
would blank ordinary words in every message."""
MASKED = "***"
_URLSAFE = str.maketrans("+/", "-_")


class Mask:
    """Replaces each secret, in each form, with `***`."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        forms = {form for s in secrets if s and len(s) >= MIN_SECRET_CHARS for form in _forms(s)}
        # Longest first, so a form is not cut short by another that begins it.
        pieces = [_escapable(form) for form in sorted(forms, key=len, reverse=True)]
        self._pattern = re.compile("|".join(pieces)) if pieces else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASKED, text) if self._pattern else text


def _forms(secret: str) -> set[str]:
    data = secret.encode()
    return {secret, secret[::-1], data.hex(), data.hex().upper(), *_base64_cores(data)}


def _base64_cores(data: bytes) -> set[str]:
    """What any base64 text that carries `data` holds, wherever `data` begins in what was
    encoded (`Bearer KEY`, `user:KEY`): for each offset modulo 3, the characters made of
    `data`'s bits alone. The characters at either end mix in their neighbours' bits."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode()
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(data)) // 6]
        cores |= {core, core.translate(_URLSAFE)}
    return cores


def _escapable(form: str) -> str:
    """A pattern for `form` with any of its characters percent-encoded (either case), and
    `/` also as JSON's `\\/`."""
    pattern = []
    for char in form:
        percent = "".join(f"%{_either_case(f'{byte:02X}')}" for byte in char.encode())
        also = r"|\\/" if char == "/" else ""
        pattern.append(f"(?:{re.escape(char)}|{percent}{also})")
    return "".join(pattern)


def _either_case(hex_digits: str) -> str:
    return "".join(f"[{d}{d.lower()}]" if d.isalpha() else d for d in hex_digits)
