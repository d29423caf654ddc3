def flatten(items: list) -> list:
    """The items of nested lists, as one flat list in order."""
    out = []
    for item in items:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
