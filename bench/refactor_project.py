"""The refactor of `make bench-delegation`: a generated project of 12 modules in which
`scale(value)`, used by 9 of them, becomes `scale_by(value, factor)`. Its tests decide:
each caller's behaviour is checked as it was, and `scale` must be gone, so a module
left calling it fails at import."""

from __future__ import annotations

from pathlib import Path

TASK = (
    "Rename the function `scale` in shop/units.py to `scale_by` and give it a second "
    "parameter `factor`: `scale_by(value, factor)` returns value * factor (today "
    "`scale(value)` returns value * 2). Update every module in shop/ that uses `scale` "
    "to call `scale_by(..., 2)`, so that what each returns stays the same. Do not change "
    "the tests; run `python3 -m pytest -q tests` to check."
)

# The callers: (module, function, what it computes from scale).
CALLERS = [
    ("cart", "line_total", "price, count", "scale(price) * count"),
    ("discount", "after_discount", "price", "scale(price) - 1"),
    ("tax", "with_tax", "price", "scale(price) + scale(price) // 10"),
    ("shipping", "postage", "weight", "scale(weight) + 3"),
    ("invoice", "invoice_line", "name, price", 'f"{name}: {scale(price)}"'),
    ("loyalty", "points", "spent", "scale(spent) // 5"),
    ("refund", "refund_of", "price", "-scale(price)"),
    ("bundle", "bundle_price", "prices", "sum(scale(p) for p in prices)"),
    ("report", "summary", "totals", 'f"{len(totals)} items, {scale(sum(totals))}"'),
]
# Modules that do not use it (the project is more than its callers).
OTHERS = [
    (
        "catalog",
        "ITEMS = {'pen': 3, 'book': 12}\n\n\ndef price_of(name):\n    return ITEMS[name]\n",
    ),
    ("names", "def title(name):\n    return name.strip().title()\n"),
]


def write_project(root: Path) -> int:
    """The project under `root`; how many tests it has."""
    shop = root / "shop"
    shop.mkdir(parents=True)
    (shop / "__init__.py").write_text('"""A small shop."""\n')
    (shop / "units.py").write_text(
        '"""Units shared by the shop."""\n\n\ndef scale(value):\n    return value * 2\n'
    )
    for module, function, params, body in CALLERS:
        (shop / f"{module}.py").write_text(
            f'"""{module.title()} of the shop."""\n\nfrom shop.units import scale\n\n\n'
            f"def {function}({params}):\n    return {body}\n"
        )
    for module, text in OTHERS:
        (shop / f"{module}.py").write_text(f'"""{module.title()} of the shop."""\n\n\n{text}')
    (root / "conftest.py").write_text("")  # the root on sys.path, for `import shop`
    return write_tests(root)


def write_tests(root: Path) -> int:
    """The project's tests, as they are before any change; how many."""
    (root / "tests").mkdir(exist_ok=True)
    checks = [
        ("cart", "line_total(5, 3) == 30"),
        ("discount", "after_discount(10) == 19"),
        ("tax", "with_tax(50) == 110"),
        ("shipping", "postage(4) == 11"),
        ("invoice", 'invoice_line("pen", 3) == "pen: 6"'),
        ("loyalty", "points(25) == 10"),
        ("refund", "refund_of(7) == -14"),
        ("bundle", "bundle_price([1, 2, 3]) == 12"),
        ("report", 'summary([1, 2]) == "2 items, 6"'),
        ("catalog", 'price_of("book") == 12'),
        ("names", 'title("  ada ") == "Ada"'),
    ]
    lines = ['"""The shop\'s tests: do not change them."""\n', "import importlib\n"]
    for module, check in checks:
        function = check.split("(")[0]
        lines.append(
            f"\ndef test_{module}():\n    from shop.{module} import {function}\n\n"
            f"    assert {check}\n"
        )
    lines.append(
        "\ndef test_scale_by_takes_a_factor():\n    from shop.units import scale_by\n\n"
        "    assert scale_by(3, 5) == 15 and scale_by(4, 2) == 8\n"
    )
    lines.append(
        "\ndef test_scale_is_gone():\n    units = importlib.import_module('shop.units')\n\n"
        "    assert not hasattr(units, 'scale')\n"
    )
    (root / "tests" / "test_shop.py").write_text("".join(lines))
    return len(checks) + 2
