def encode(text: str) -> str:
    """Run-length encoding: 'aaab' -> '3a1b'."""
    raise NotImplementedError


def decode(text: str) -> str:
    """The inverse of encode: '3a1b' -> 'aaab'."""
    raise NotImplementedError
