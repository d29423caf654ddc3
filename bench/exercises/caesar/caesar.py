def caesar(text: str, shift: int) -> str:
    """Each letter moved `shift` places through the alphabet, case kept, others unchanged."""
    raise NotImplementedError
