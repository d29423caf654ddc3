import unittest

from settings import parse


class TestParse(unittest.TestCase):
    def test_plain_lines(self):
        self.assertEqual(
            parse("host = example.org\nport=80"), {"host": "example.org", "port": "80"}
        )

    def test_blank_and_comment_lines(self):
        self.assertEqual(parse("\n# a comment\n   \nname = gaffer\n"), {"name": "gaffer"})

    def test_comment_after_the_value(self):
        self.assertEqual(
            parse("port = 80  # web\nmode = fast# quick"), {"port": "80", "mode": "fast"}
        )


if __name__ == "__main__":
    unittest.main()
