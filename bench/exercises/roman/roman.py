def to_roman(n: int) -> str:
    """n (1 to 3999) as a Roman numeral."""
    raise NotImplementedError
