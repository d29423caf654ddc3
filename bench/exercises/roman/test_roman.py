import unittest

from roman import to_roman


class TestRoman(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(to_roman(1), "I")
        self.assertEqual(to_roman(8), "VIII")

    def test_subtractive(self):
        self.assertEqual(to_roman(4), "IV")
        self.assertEqual(to_roman(9), "IX")
        self.assertEqual(to_roman(40), "XL")
        self.assertEqual(to_roman(1994), "MCMXCIV")

    def test_large(self):
        self.assertEqual(to_roman(3999), "MMMCMXCIX")


if __name__ == "__main__":
    unittest.main()
