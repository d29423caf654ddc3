import re


def encode(text: str) -> str:
    """Run-length encoding: 'aaab' -> '3a1b'."""
    return "".join(
        f"{len(m.group(0))}{m.group(1)}" for m in re.finditer(r"(.)\1*", text, re.DOTALL)
    )


def decode(text: str) -> str:
    """The inverse of encode: '3a1b' -> 'aaab'."""
    return "".join(char * int(count) for count, char in re.findall(r"(\d+)(\D)", text))
