def flatten(items: list) -> list:
    """The items of nested lists, as one flat list in order."""
    raise NotImplementedError
