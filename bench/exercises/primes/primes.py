def is_prime(n: int) -> bool:
    """True when n is a prime number."""
    raise NotImplementedError
