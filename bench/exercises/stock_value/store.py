"""The shop's stock."""

from models import Item


class Store:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        self.items[item.name] = item

    def total_value(self) -> float:
        """What everything in stock is worth."""
        return sum(item.price for item in self.items.values())
