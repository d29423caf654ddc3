def is_palindrome(text: str) -> bool:
    """True when text reads the same backwards, counting only letters and digits, case ignored."""
    kept = [c.lower() for c in text if c.isalnum()]
    return kept == kept[::-1]
