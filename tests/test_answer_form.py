"""A reader asked numbered questions answers each on its own numbered line."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_agent
from tests.test_citations import package, reader_gate
from workers.log.events import Recorder
from workers.loop import run_agent
from workers.model.scripted import ScriptedModel, call, say
from workers.numbered import items, unanswered
from workers.outcome import Finished
from workers.repo_map.tool import find_symbol_tool
from workers.tools import BUILTIN_TOOLS

TASK = (
    "Answer each question with the path of one file, as a numbered list.\n"
    "1. Which file defines the bound logger?\n"
    "2. Which file renders to the console?"
)


def test_the_numbers_an_answer_leaves_out() -> None:
    assert unanswered(TASK, "1. stdlib.py\n2. dev.py") == []
    assert unanswered(TASK, "**1.** `stdlib.py`\n### 2) dev.py") == []
    assert unanswered(TASK, "- 1: stdlib.py\n- 2: dev.py") == []
    assert unanswered(TASK, "The logger is in stdlib.py and the console in dev.py.") == [1, 2]
    assert unanswered(TASK, "1. stdlib.py; 2. dev.py") == [2]  # one line for both
    for numbered_so in ("(1) a\n[2] b", "Q1: a\nQuestion 2 - b", "| 1 | a |\n| 2 | b |"):
        assert unanswered(TASK, numbered_so) == [], numbered_so
    assert unanswered(TASK, '{"1": "stdlib.py", "2": "dev.py"}'.replace(", ", ",\n")) == []
    # A worker's share of the questions, numbered as in the whole: 3 and 4.
    assert unanswered("3. Where is A?\n4. Where is B?", "3. a.py") == [4]
    # Not numbered questions: nothing is asked of the answer's form.
    assert unanswered("Fix it.\n2. first\n4. second", "done") == []
    assert unanswered("1. Where is it?", "done") == []
    assert unanswered("In 2024 we had:\n1999. a\n2000. b", "done") == []
    steps = "Reproduce it:\n1. run make\n2. open the page\n3. see the error. Why?"
    assert unanswered(steps, "The page calls a missing route.") == []
    assert unanswered("1.\nWhere is A?\n2.\nWhere is B?", "done") == []


def test_items_with_and_without_bullets() -> None:
    text = "Do these:\n1. read it\n2) fix it\n- test it"
    assert items(text) == ["read it", "fix it"]
    assert items(text, bullets=True) == ["read it", "fix it", "test it"]


def run(workspace: Path, script: list[object]) -> tuple[object, ScriptedModel, Recorder]:
    recorder = Recorder()
    model = ScriptedModel(script)  # type: ignore[arg-type]
    tools = {**BUILTIN_TOOLS, "find_symbol": find_symbol_tool(workspace)}
    agent = make_agent(
        workspace, model, recorder, gate=reader_gate(workspace, recorder), tools=tools
    )
    result = run_agent(
        agent, [{"role": "system", "content": "sys"}, {"role": "user", "content": TASK}]
    )
    return result.outcome, model, recorder


def test_an_answer_in_one_sentence_goes_back_once_for_its_lines(workspace: Path) -> None:
    package(workspace)
    prose = "The bound logger is in stdlib.py, and dev.py renders to the console."
    outcome, model, recorder = run(
        workspace,
        [call("grep", pattern="class"), say(prose), say("1. stdlib.py\n2. dev.py")],
    )
    assert outcome == Finished("1. stdlib.py\n2. dev.py")
    sent = str(model.seen[-1][-1]["content"])
    assert sent.startswith("Your answer has no numbered line for 1, 2.")
    assert model.paused[-1] is False and model.required[-1] is False  # no call asked for
    [verdict] = [r for r in recorder.of("verification") if r["action"] == "sent_back"]
    assert verdict["verdict"] == "unanswered" and verdict["reason"] == "no numbered line for 1, 2"


def test_a_second_unnumbered_answer_goes_through(workspace: Path) -> None:
    """Asked once: a model that cannot number its lines still gives its answer."""
    package(workspace)
    prose = "The bound logger is in stdlib.py, and dev.py renders to the console."
    outcome, model, _ = run(workspace, [call("grep", pattern="class"), say(prose), say(prose)])
    assert outcome == Finished(prose)
    model.assert_used_up()


def test_an_answers_items_by_number_whatever_the_layout() -> None:
    from workers.numbered import item_spans, without_items

    def lines_by_number(answer: str) -> dict[int, str]:
        return {n: " ".join(answer[a:b].split()) for n, (a, b) in item_spans(answer).items()}

    assert lines_by_number("From the map:\n\n1. parser.py\n\n2. cache.py") == {
        1: "1. parser.py",
        2: "2. cache.py",
    }
    # A number that goes on is no item; an item's lines under it are its own.
    assert lines_by_number("Python 3.11, a 1.5B model:\n1. **the parser**\n   parser.py") == {
        1: "1. **the parser** parser.py"
    }
    # The questions listed again before the answers: the answers are the items.
    assert lines_by_number("1. Where is A?\n2. Where is B?\n\n1. a.py\n2. b.py")[2] == "2. b.py"
    # A list nested in an item is the item's; what follows the list is no item's.
    nested = "1. parser.py\n2. cache.py, in two steps:\n   1. util.py keys\n   2. cache.py\n\nDone."
    assert lines_by_number(nested) == {
        1: "1. parser.py",
        2: "2. cache.py, in two steps: 1. util.py keys 2. cache.py",
    }
    assert without_items(nested, {2}) == "1. parser.py\n\nDone."
    assert without_items("Found:\n1. a.py\n2. b.py\n3. c.py", {1, 3}) == "Found:\n2. b.py"


def test_a_first_answer_sent_with_a_task_leaves_its_questions_checked() -> None:
    from workers.aids.task_parts import DRAFTED

    task = TASK + DRAFTED.format(lines="1. stdlib.py\n2. dev.py", example="find_symbol")
    assert unanswered(task, "1. stdlib.py") == [2]
