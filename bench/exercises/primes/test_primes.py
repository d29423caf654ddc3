import unittest

from primes import is_prime


class TestPrimes(unittest.TestCase):
    def test_small_numbers(self):
        self.assertEqual([n for n in range(20) if is_prime(n)], [2, 3, 5, 7, 11, 13, 17, 19])

    def test_negative_and_large(self):
        self.assertFalse(is_prime(-7))
        self.assertTrue(is_prime(7919))
        self.assertFalse(is_prime(7917))


if __name__ == "__main__":
    unittest.main()
