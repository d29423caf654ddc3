import unittest

from models import Item
from store import Store


class TestStore(unittest.TestCase):
    def test_single_units(self):
        store = Store()
        store.add(Item("pen", 2.0))
        store.add(Item("pad", 3.5))
        self.assertAlmostEqual(store.total_value(), 5.5)

    def test_several_units(self):
        store = Store()
        store.add(Item("pen", 2.0, quantity=10))
        store.add(Item("pad", 3.5, quantity=2))
        self.assertAlmostEqual(store.total_value(), 27.0)

    def test_empty(self):
        self.assertEqual(Store().total_value(), 0)


if __name__ == "__main__":
    unittest.main()
