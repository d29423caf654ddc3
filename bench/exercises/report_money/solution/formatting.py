"""How numbers are shown to people."""


def money(amount: float) -> str:
    return f"${amount:.2f}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"
