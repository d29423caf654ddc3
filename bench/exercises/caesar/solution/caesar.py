def caesar(text: str, shift: int) -> str:
    """Each letter moved `shift` places through the alphabet, case kept, others unchanged."""
    out = []
    for char in text:
        if char.isalpha() and char.isascii():
            base = ord("A") if char.isupper() else ord("a")
            out.append(chr(base + (ord(char) - base + shift) % 26))
        else:
            out.append(char)
    return "".join(out)
