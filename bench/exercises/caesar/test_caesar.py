import unittest

from caesar import caesar


class TestCaesar(unittest.TestCase):
    def test_shift(self):
        self.assertEqual(caesar("abc", 1), "bcd")
        self.assertEqual(caesar("xyz", 3), "abc")

    def test_case_and_punctuation(self):
        self.assertEqual(caesar("Hello, World!", 13), "Uryyb, Jbeyq!")

    def test_negative(self):
        self.assertEqual(caesar("bcd", -1), "abc")


if __name__ == "__main__":
    unittest.main()
