def binary_search(items: list[int], target: int) -> int:
    """The index of target in the sorted list items, or -1 when it is not there."""
    raise NotImplementedError
