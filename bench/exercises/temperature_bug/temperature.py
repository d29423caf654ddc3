def to_fahrenheit(celsius: float) -> float:
    return celsius * 5 / 9 + 32


def to_celsius(fahrenheit: float) -> float:
    return (fahrenheit - 32) * 5 / 9
