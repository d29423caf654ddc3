def is_palindrome(text: str) -> bool:
    """True when text reads the same backwards, counting only letters and digits, case ignored."""
    raise NotImplementedError
