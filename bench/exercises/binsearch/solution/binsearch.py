def binary_search(items: list[int], target: int) -> int:
    """The index of target in the sorted list items, or -1 when it is not there."""
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1
