"""A Python block merged into its file by definition: it changes what it shows and never
deletes what it does not."""

from __future__ import annotations

import pytest

from workers.aids.python_merge import MergeProblem, defines, merge

STATS = '''"""Small statistics."""

import math


def mean(values):
    return sum(values) / len(values)


@staticmethod
def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def spread(values):
    return max(values) - min(values)


if __name__ == "__main__":
    print(mean([1, 2]))
'''


def test_functions_are_replaced_by_name_and_the_rest_stays() -> None:
    block = (
        "from statistics import fmean\n\n@staticmethod\ndef median(values):\n"
        "    ordered = sorted(values)\n    middle = len(ordered) // 2\n"
        "    return ordered[middle]\n\n\ndef helper():\n    return LIMIT\n\n\nLIMIT = 3\n"
        "print(median([1]))\n"
    )
    assert merge(STATS, block) == (
        '"""Small statistics."""\n\nimport math\nfrom statistics import fmean\n\nLIMIT = 3\n\n\n'
        "def mean(values):\n    return sum(values) / len(values)\n\n\n"
        "@staticmethod\ndef median(values):\n    ordered = sorted(values)\n"
        "    middle = len(ordered) // 2\n    return ordered[middle]\n\n\n"
        "def spread(values):\n    return max(values) - min(values)\n\n\n"
        "def helper():\n    return LIMIT\n\n\n"
        'if __name__ == "__main__":\n    print(mean([1, 2]))\n'
    ), "a new constant the code uses goes after the imports; the example print does not go in"


def test_a_block_with_every_function_keeps_the_file_s_imports_and_main() -> None:
    old = (
        "import math\n\n\ndef area(r):\n    return 0\n\n\nif __name__ == '__main__':\n    area(1)\n"
    )
    merged = merge(old, "def area(r):\n    return math.pi * r ** 2\n")
    assert merged == (
        "import math\n\n\ndef area(r):\n    return math.pi * r ** 2\n\n\n"
        "if __name__ == '__main__':\n    area(1)\n"
    )


def test_a_class_given_with_some_methods_keeps_the_others() -> None:
    old = (
        "class Calc:\n    '''Sums.'''\n\n    def add(self, a, b):\n        return 0\n\n"
        "    def sub(self, a, b):\n        return a - b\n"
    )
    block = "class Calc:\n    def add(self, a, b):\n        return a + b\n\n    def mul(self, a, b):\n        return a * b\n"
    assert merge(old, block) == (
        "class Calc:\n    '''Sums.'''\n\n    def add(self, a, b):\n        return a + b\n\n"
        "    def sub(self, a, b):\n        return a - b\n\n    def mul(self, a, b):\n        return a * b\n"
    )
    alone = "def sub(self, a, b):\n    return b - a\n"
    assert "    def sub(self, a, b):\n        return b - a\n" in merge(old, alone), (
        "a method given on its own goes into its class"
    )


def test_a_whole_class_replaces_the_class() -> None:
    old = "class Stack:\n    def push(self, x):\n        raise NotImplementedError\n"
    block = "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n"
    assert merge(old, block) == block


def test_imports_go_where_python_allows_them() -> None:
    old = "#!/usr/bin/env python3\nimport os\n\n\ndef f():\n    return os.sep\n"
    merged = merge(
        old, "from __future__ import annotations\n\ndef f() -> str:\n    return os.sep\n"
    )
    assert merged.startswith(
        "#!/usr/bin/env python3\nfrom __future__ import annotations\nimport os\n"
    )
    bare = "#!/usr/bin/env python3\ndef f():\n    return 1\n"
    assert merge(bare, "import sys\n\ndef f():\n    return sys.maxsize\n").startswith(
        "#!/usr/bin/env python3\nimport sys\ndef f():"
    ), "after the shebang, never above it"


def test_lines_are_lines_as_python_counts_them() -> None:
    old = "S = 'a\u2028b'\n\f\ndef g():\n    pass\n"
    merged = merge(old, "def g():\n    return S\n")
    assert merged == "S = 'a\u2028b'\n\f\ndef g():\n    return S\n"


def test_what_cannot_be_merged_is_refused_with_a_reason() -> None:
    with pytest.raises(MergeProblem, match="not valid Python"):
        merge("x = 1\n", "def f(:\n")
    broken = "def f():\n    return (\n\ndef g():\n    return 2\n"
    with pytest.raises(MergeProblem, match="does not parse"):
        merge(broken, "def f():\n    return 1\n")
    fixed = "def f():\n    return 1\n\ndef g():\n    return 2\n"
    assert merge(broken, fixed) == fixed, "a block with all of a broken file replaces it"
    assert merge("", "x = 1\n") == "x = 1\n", "an empty file takes the block"


def test_defines_names_functions_classes_and_methods() -> None:
    assert defines(STATS) == {"mean", "median", "spread"}
    assert defines("class A:\n    def m(self):\n        pass\nX = 1\n") == {"A", "m"}
    assert defines("not python(") == set()
