import unittest

from palindrome import is_palindrome


class TestPalindrome(unittest.TestCase):
    def test_sentences(self):
        self.assertTrue(is_palindrome("A man, a plan, a canal: Panama"))
        self.assertFalse(is_palindrome("race a car"))

    def test_short(self):
        self.assertTrue(is_palindrome(""))
        self.assertTrue(is_palindrome("x"))
        self.assertTrue(is_palindrome("No 'x' in Nixon"))


if __name__ == "__main__":
    unittest.main()
