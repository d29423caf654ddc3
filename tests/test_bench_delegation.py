"""The scoring of `make bench-delegation` (bench/delegation.py), with no model: the answer
key comes from the code, a numbered reply is scored item by item, and the refactor's
tests fail before the change and pass after a right one."""

from __future__ import annotations

import re
from pathlib import Path

from bench.delegation import SURVEYS, copy_package, passing_tests, score, survey_of
from bench.refactor_project import CALLERS, write_project, write_tests


def test_every_survey_question_has_its_answer_in_the_installed_code(tmp_path: Path) -> None:
    for package, asked in SURVEYS:
        root = copy_package(package, tmp_path)
        task, expected = survey_of(package, root, asked)
        assert len(expected) == len(asked) >= 8, f"{package}: a symbol moved"
        names = [Path(p).name for p in expected]
        assert len(set(names)) == len(names), "each answer is a file its name picks out"
        assert all((root / p).is_file() for p in expected)
        for _, symbol in asked:  # a plain word ("command") may be said in passing
            if "_" in symbol or symbol[0].isupper():
                assert symbol not in task, "a question names no symbol"


def test_a_numbered_reply_is_scored_item_by_item() -> None:
    expected = ["click/core.py", "termui.py", "_termui_impl.py"]
    expected = ["core.py", "termui.py", "retry.py"]
    reply = "1. `core.py` holds Context\n2) it is in _termui_impl.py\n3. asyncio/retry.py"
    assert score(reply, expected) == 1, "another file of the same name is not it"
    assert score("core.py, termui.py and retry.py", expected) == 0, "no numbers"
    assert score("From what I found: 1. ./core.py\n- 2: pkg/termui.py", expected, "pkg") == 2
    every = "\n".join(f"{n}. termui.py core.py retry.py" for n in (1, 2, 3))
    assert score(every, expected) == 1, "only the first path of an item counts"
    absolute = "1. `/tmp/tmpab12/pkg/core.py`\n2. /tmp/tmpab12/other/termui.py"
    assert score(absolute, expected, "pkg") == 1, "the workspace's own absolute path"
    under = (
        "1. **Which file holds it?**\n   - **Files:** `core.py`\n\n2. **And this?**\n3. retry.py"
    )
    assert score(under, expected) == 2, "an answer on the lines under its item's number"


def test_the_refactor_s_tests_fail_before_and_pass_after_a_right_change(tmp_path: Path) -> None:
    total = write_project(tmp_path)
    assert total == 13 and len(CALLERS) >= 8
    assert len(list((tmp_path / "shop").glob("*.py"))) - 1 >= 12, "12 modules besides __init__"
    assert passing_tests(tmp_path) == (11, 13)
    units = tmp_path / "shop" / "units.py"
    units.write_text("def scale_by(value, factor):\n    return value * factor\n")
    for module, *_ in CALLERS[:-1]:  # all but one caller
        path = tmp_path / "shop" / f"{module}.py"
        text = path.read_text().replace("import scale\n", "import scale_by\n")
        path.write_text(
            re.sub(r"\bscale\(([^()]*(?:\([^()]*\))?[^()]*)\)", r"scale_by(\1, 2)", text)
        )
    assert passing_tests(tmp_path) == (12, 13), "the caller left behind fails"
    last = tmp_path / "shop" / f"{CALLERS[-1][0]}.py"
    text = last.read_text().replace("import scale\n", "import scale_by\n")
    last.write_text(text.replace("scale(sum(totals))", "scale_by(sum(totals), 2)"))
    assert passing_tests(tmp_path) == (13, 13)
    (tmp_path / "tests" / "test_shop.py").write_text("def test_nothing():\n    pass\n")
    assert write_tests(tmp_path) == 13 and passing_tests(tmp_path) == (13, 13)


def test_right_answers_only_under_gaffers_unchecked_line_are_counted_apart() -> None:
    from bench.delegation import _checked
    from workers.aids.joined_reports import UNCHECKED

    answer = f"1. a.py\n{UNCHECKED}\n2. b.py\n3. c.py\n\nLeft out: x"
    assert score(answer, ["a.py", "b.py", "c.py"]) == 3
    assert score(_checked(answer), ["a.py", "b.py", "c.py"]) == 1
    assert _checked(answer).endswith("Left out: x")
