import unittest

from binsearch import binary_search


class TestBinarySearch(unittest.TestCase):
    def test_found(self):
        items = [1, 3, 5, 7, 9, 11]
        for index, value in enumerate(items):
            self.assertEqual(binary_search(items, value), index)

    def test_missing(self):
        self.assertEqual(binary_search([1, 3, 5], 4), -1)
        self.assertEqual(binary_search([], 1), -1)
        self.assertEqual(binary_search([1, 3, 5], 6), -1)


if __name__ == "__main__":
    unittest.main()
