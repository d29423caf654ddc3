import unittest

from wordcount import word_count


class TestWordCount(unittest.TestCase):
    def test_counts_lowercased_words(self):
        self.assertEqual(
            word_count("The cat and the hat."), {"the": 2, "cat": 1, "and": 1, "hat": 1}
        )

    def test_punctuation_and_spacing(self):
        self.assertEqual(word_count("  Hello, hello!  World?  "), {"hello": 2, "world": 1})

    def test_empty(self):
        self.assertEqual(word_count(""), {})


if __name__ == "__main__":
    unittest.main()
