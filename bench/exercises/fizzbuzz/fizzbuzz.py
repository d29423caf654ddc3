def fizzbuzz(n: int) -> list[str]:
    """The FizzBuzz sequence from 1 to n."""
    raise NotImplementedError
