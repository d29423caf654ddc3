import re


def word_count(text: str) -> dict[str, int]:
    """How often each word occurs, lowercased, punctuation ignored."""
    counts: dict[str, int] = {}
    for word in re.findall(r"[a-z0-9']+", text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return counts
