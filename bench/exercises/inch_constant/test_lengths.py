import unittest

from lengths import feet_to_cm, inches_to_cm, miles_to_km


class TestLengths(unittest.TestCase):
    def test_inches(self):
        self.assertAlmostEqual(inches_to_cm(1), 2.54)
        self.assertAlmostEqual(inches_to_cm(10), 25.4)

    def test_a_foot_is_twelve_inches(self):
        self.assertAlmostEqual(inches_to_cm(12), feet_to_cm(1))

    def test_feet_and_miles(self):
        self.assertAlmostEqual(feet_to_cm(2), 60.96)
        self.assertAlmostEqual(miles_to_km(1), 1.609344)


if __name__ == "__main__":
    unittest.main()
