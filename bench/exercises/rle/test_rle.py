import unittest

from rle import decode, encode


class TestRunLength(unittest.TestCase):
    def test_encode(self):
        self.assertEqual(encode("aaab"), "3a1b")
        self.assertEqual(encode("wwwwwwwwwwwwb"), "12w1b")
        self.assertEqual(encode(""), "")

    def test_decode(self):
        self.assertEqual(decode("3a1b"), "aaab")
        self.assertEqual(decode("12w1b"), "wwwwwwwwwwwwb")

    def test_round_trip(self):
        self.assertEqual(decode(encode("hello  world")), "hello  world")


if __name__ == "__main__":
    unittest.main()
