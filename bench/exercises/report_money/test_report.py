import unittest

from report import sales_report


class TestReport(unittest.TestCase):
    def test_two_decimals(self):
        self.assertEqual(
            sales_report({"tea": 3.5, "cake": 8.5}),
            "tea: $3.50 (29%)\ncake: $8.50 (71%)\ntotal: $12.00",
        )

    def test_cents(self):
        self.assertEqual(sales_report({"pen": 1.25}), "pen: $1.25 (100%)\ntotal: $1.25")


if __name__ == "__main__":
    unittest.main()
