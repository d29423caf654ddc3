import unittest

from temperature import to_celsius, to_fahrenheit


class TestTemperature(unittest.TestCase):
    def test_to_fahrenheit(self):
        self.assertEqual(to_fahrenheit(100), 212)
        self.assertEqual(to_fahrenheit(0), 32)

    def test_to_celsius(self):
        self.assertEqual(to_celsius(212), 100)

    def test_round_trip(self):
        self.assertAlmostEqual(to_celsius(to_fahrenheit(37.5)), 37.5)


if __name__ == "__main__":
    unittest.main()
