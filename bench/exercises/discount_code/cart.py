"""Checkout: the prices in a cart, less any discount code."""

from pricing import discount_for


def checkout(prices: list[float], code: str = "") -> float:
    total = sum(prices)
    return round(total * (1 - discount_for(code)), 2)
