import unittest

from flatten import flatten


class TestFlatten(unittest.TestCase):
    def test_nested(self):
        self.assertEqual(flatten([1, [2, [3, [4]], 5], [], [[6]]]), [1, 2, 3, 4, 5, 6])

    def test_flat_and_empty(self):
        self.assertEqual(flatten([1, 2]), [1, 2])
        self.assertEqual(flatten([]), [])

    def test_strings_are_items(self):
        self.assertEqual(flatten(["ab", ["cd"]]), ["ab", "cd"])


if __name__ == "__main__":
    unittest.main()
