import unittest

from stack import Stack


class TestStack(unittest.TestCase):
    def test_push_pop_order(self):
        stack = Stack()
        stack.push(1)
        stack.push(2)
        self.assertEqual(stack.peek(), 2)
        self.assertEqual(stack.pop(), 2)
        self.assertEqual(stack.pop(), 1)
        self.assertTrue(stack.is_empty())

    def test_len(self):
        stack = Stack()
        for i in range(3):
            stack.push(i)
        self.assertEqual(len(stack), 3)

    def test_empty_raises(self):
        with self.assertRaises(IndexError):
            Stack().pop()
        with self.assertRaises(IndexError):
            Stack().peek()


if __name__ == "__main__":
    unittest.main()
