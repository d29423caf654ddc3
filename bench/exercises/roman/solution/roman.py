def to_roman(n: int) -> str:
    """n (1 to 3999) as a Roman numeral."""
    values = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ]
    out = ""
    for value, letters in values:
        while n >= value:
            out += letters
            n -= value
    return out
