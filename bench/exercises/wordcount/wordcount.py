def word_count(text: str) -> dict[str, int]:
    """How often each word occurs, lowercased, punctuation ignored."""
    raise NotImplementedError
