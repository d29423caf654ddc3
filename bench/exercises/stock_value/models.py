"""What the shop sells."""

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 1
