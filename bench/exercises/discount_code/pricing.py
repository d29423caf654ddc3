"""Discount codes and what they take off, as a fraction of the price."""

DISCOUNTS = {
    "TENOFF": 0.10,
    "STAFF": 0.25,
}


def discount_for(code: str) -> float:
    """The fraction a code takes off; 0 for an unknown code. Codes ignore case."""
    return DISCOUNTS.get(code.strip().upper(), 0.0)
