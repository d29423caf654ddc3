def is_prime(n: int) -> bool:
    """True when n is a prime number."""
    if n < 2:
        return False
    factor = 2
    while factor * factor <= n:
        if n % factor == 0:
            return False
        factor += 1
    return True
