import unittest

from cart import checkout


class TestCheckout(unittest.TestCase):
    def test_no_code(self):
        self.assertEqual(checkout([10.0, 5.0]), 15.0)

    def test_known_codes(self):
        self.assertEqual(checkout([100.0], "TENOFF"), 90.0)
        self.assertEqual(checkout([100.0], "staff"), 75.0)

    def test_half(self):
        self.assertEqual(checkout([30.0, 10.0], "HALF"), 20.0)
        self.assertEqual(checkout([9.0], " half "), 4.5)

    def test_unknown_code(self):
        self.assertEqual(checkout([10.0], "FREE"), 10.0)


if __name__ == "__main__":
    unittest.main()
