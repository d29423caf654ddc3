import unittest

from intervals import merge_intervals


class TestIntervals(unittest.TestCase):
    def test_overlapping(self):
        self.assertEqual(
            merge_intervals([(1, 3), (2, 6), (8, 10), (15, 18)]), [(1, 6), (8, 10), (15, 18)]
        )

    def test_touching_and_unsorted(self):
        self.assertEqual(merge_intervals([(5, 7), (1, 5)]), [(1, 7)])

    def test_contained_and_empty(self):
        self.assertEqual(merge_intervals([(1, 10), (2, 3)]), [(1, 10)])
        self.assertEqual(merge_intervals([]), [])


if __name__ == "__main__":
    unittest.main()
