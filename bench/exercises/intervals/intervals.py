def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching (start, end) intervals merged, sorted by start."""
    raise NotImplementedError
