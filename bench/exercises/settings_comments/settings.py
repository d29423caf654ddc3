"""Reads settings files: one `key = value` per line, `#` starts a comment."""


def parse_line(line: str) -> tuple[str, str] | None:
    """One line as (key, value); None for blank lines and comment lines."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    key, value = line.split("=", 1)
    return key.strip(), value.strip()


def parse(text: str) -> dict[str, str]:
    settings = {}
    for line in text.splitlines():
        pair = parse_line(line)
        if pair is not None:
            settings[pair[0]] = pair[1]
    return settings
