"""How numbers are shown to people."""


def money(amount: float) -> str:
    return f"${amount}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"
