"""A top agent that works only through workers (the dispatcher, the default on the
bundled model): it is shown the task's parts, must delegate before it answers, and
answers once its workers have reported (workers/aids/task_parts.py, reports_answer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.run_setup import default_top
from tests.test_delegation import of, run_session
from workers.agent import AgentResult
from workers.aids.joined_reports import joined_answer
from workers.aids.reports_answer import ANSWER_FROM_REPORTS
from workers.aids.task_parts import PART, grouped, handed_out, parts_of
from workers.hooks import REPORTED
from workers.log.events import Record
from workers.model.scripted import RoutedModel, Step, call, say
from workers.outcome import Finished
from workers.report_lines import ANSWER_HEADING, BLIND, LEFT_OUT, REPORTED_UNSUPPORTED, quoted

SURVEY = "Survey this project: where the parser lives, which file holds the cache."


def run_joining(
    workspace: Path, tmp_path: Path, scripts: dict[str, list[Step]]
) -> tuple[AgentResult, list[Record], RoutedModel]:
    """The survey through a dispatcher that joins its readers' answers (a small model's)."""
    return run_session(
        workspace,
        tmp_path,
        scripts,
        task=SURVEY,
        top="dispatcher",
        task_mode=True,
        verify=True,
        file_blocks=True,
    )


def test_a_dispatcher_hands_each_part_of_a_question_to_an_explorer_and_answers_from_the_reports(
    workspace: Path, tmp_path: Path
) -> None:
    parts = ["where the parser lives", "which file holds the cache"]
    tasks = [PART.format(part=part, task=SURVEY) for part in parts]
    scripts: dict[str, list[Step]] = {
        SURVEY: [say("parser.py; cache.py")],
        **{t: [call("list_dir", path="."), say(f"found: {t[:20]}")] for t in tasks},
    }
    result, records, model = run_session(
        workspace, tmp_path, scripts, task=SURVEY, top="dispatcher", task_mode=True
    )

    assert result.outcome == Finished("parser.py; cache.py")
    top = model._models[SURVEY]
    assert top.paused == [True], "its one reply is the answer, tools off"
    reports, ask = top.seen[0][-2]["content"], top.seen[0][-1]["content"]
    assert reports.startswith(REPORTED)
    assert "found: where the parser" in reports and "found: which file holds" in reports
    assert ask == ANSWER_FROM_REPORTS.format(task=SURVEY)
    starts = of(records, "agent_start")
    assert [s["profile"] for s in starts] == ["dispatcher", "explorer", "explorer"]
    (delegation,) = [c for c in of(records, "tool_call") if c["name"] == "delegate"]
    assert delegation["agent_id"] == "supervisor" and delegation["args"]["tasks"] == tasks


def test_on_a_small_model_the_workers_answers_joined_are_the_answer_less_what_none_read(
    workspace: Path, tmp_path: Path
) -> None:
    """A small model shown its workers' answers writes them out again, adding files none
    of them read: the harness joins the answers under their parts instead, leaves out the
    sentences gaffer could not bear out, and says what it left out."""
    (workspace / "parser.py").write_text("def parse(text):\n    return text\n")
    (workspace / "cache.py").write_text("CACHE = {}\n")
    parts = ["where the parser lives", "which file holds the cache"]
    tasks = [PART.format(part=part, task=SURVEY) for part in parts]
    guessed = "It is in parser.py. Its helpers are in lexer.py."
    scripts: dict[str, list[Step]] = {
        SURVEY: [say("never asked")],
        tasks[0]: [call("read_file", path="parser.py"), say(guessed), say(guessed), say(guessed)],
        tasks[1]: [call("list_dir", path="."), say("The cache is `CACHE` in cache.py.")],
    }
    result, records, model = run_joining(workspace, tmp_path, scripts)

    assert isinstance(result.outcome, Finished)
    answer = result.outcome.answer
    assert model._models[SURVEY].seen == [], "the dispatcher's model wrote nothing"
    assert answer.startswith(
        "1. where the parser lives\nIt is in parser.py.\n\n"
        "2. which file holds the cache\nThe cache is `CACHE` in cache.py.\n\n"
        + LEFT_OUT
        + "w1: it names lexer.py, which none of your calls opened, listed or matched"
    ), answer
    assert "Its helpers are in lexer.py" not in answer
    assert "Unsupported" not in answer, "the joined answer carries no claim nobody bore out"
    assert result.messages[-1] == {"role": "assistant", "content": answer}, "a chat knows it"
    [end] = of(records, "agent_end", agent_id="supervisor")
    assert end["status"] == "completed" and end["steps"] == 0


def test_a_dispatcher_is_shown_the_parts_of_a_change_and_delegates_them_itself(
    workspace: Path, tmp_path: Path
) -> None:
    job = "Make two changes:\n1. rename parse to parse_text\n2. add a docstring to cache.py"
    scripts: dict[str, list[Step]] = {
        job: [call("delegate", profile="explorer", task="look"), say("done")],
        "look": [call("list_dir", path="."), say("looked")],
    }
    result, _, model = run_session(
        workspace, tmp_path, scripts, task=job, top="dispatcher", task_mode=True
    )

    assert result.outcome == Finished("done")
    top = model._models[job]
    assert top.required[0], "it delegates before it answers"
    told = top.seen[0][-1]["content"]
    assert told.endswith("\n1. rename parse to parse_text\n2. add a docstring to cache.py")


def test_a_dispatcher_whose_delegation_started_no_worker_keeps_its_tools(
    workspace: Path, tmp_path: Path
) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [
            call("delegate", profile="explorer", tasks=["", ""]),
            call("delegate", profile="explorer", task="look"),
            say("it looked"),
        ],
        "look": [call("list_dir", path="."), say("looked")],
    }
    result, _, model = run_session(workspace, tmp_path, scripts, top="dispatcher", task_mode=True)

    assert result.outcome == Finished("it looked")
    assert model._models["the job"].paused == [False, False, True]


def test_a_reply_that_calls_after_the_reports_gets_its_tools_back(
    workspace: Path, tmp_path: Path
) -> None:
    """A job that needs a second round can still have one: the paused reply's call
    runs nothing, tools come back, and the next batch of reports is answered."""
    scripts: dict[str, list[Step]] = {
        "the job": [
            call("delegate", profile="explorer", task="look"),
            say('{"name": "delegate", "arguments": {"profile": "explorer", "task": "again"}}'),
            call("delegate", profile="explorer", task="again"),
            say("both looked"),
        ],
        "look": [call("list_dir", path="."), say("looked")],
        "again": [call("list_dir", path="."), say("looked again")],
    }
    result, _, model = run_session(workspace, tmp_path, scripts, top="dispatcher", task_mode=True)

    assert result.outcome == Finished("both looked")
    assert model._models["the job"].paused == [False, True, False, True]


@pytest.mark.parametrize(
    ("task", "parts"),
    [
        (
            "Survey this repository for a newcomer: what each top-level folder is for, "
            "where the agent loop lives, and how a worker is sandboxed.",
            [
                "what each top-level folder is for",
                "where the agent loop lives",
                "how a worker is sandboxed",
            ],
        ),
        (
            "Answer each with a file path:\n1. Which file defines the lexer?\n2) Where is the cache?",
            ["Which file defines the lexer?", "Where is the cache?"],
        ),
        ("Where is the lexer? What calls it?", ["Where is the lexer?", "What calls it?"]),
        (
            "What is workers/loop.py for? Where is Budget defined?",
            ["What is workers/loop.py for?", "Where is Budget defined?"],
        ),
        ("Fix the parser: it crashes on empty input, and keep the API as it is.", []),
        ("the tests in tests/test_calc.py fail; find out why and fix it", []),
        ("Rename parse to parse_text everywhere and run the tests.", []),
        ("Note: be brief", []),
        ("Give it a parameter `factor`: it returns v * factor. Update callers, then test.", []),
        ("hello there", []),
        (
            "Survey this package for a newcomer. In which file is each of these defined: "
            "BoundLogger, `get_logger()` and wrap_logger? Give the file for each.",
            [
                "In which file is each of these defined: BoundLogger?",
                "In which file is each of these defined: get_logger?",
                "In which file is each of these defined: wrap_logger?",
            ],
        ),
        ("Which is faster: json.loads or orjson.loads?", []),
        ("Where is `x` defined? I tried this: foo and bar", []),
        # Parts that cannot all go out are not split at all: none would go unanswered.
        ("Explain:\n1. Sandboxing\n2. Where is the loop?\n3. How are logs kept?", []),
        ("Answer:\n" + "".join(f"{n}. Where is part {n}?\n" for n in range(1, 14)), []),
    ],
)
def test_the_parts_of_a_task_are_its_own_items_questions_or_listed_clauses(
    task: str, parts: list[str]
) -> None:
    assert parts_of(task) == parts


def test_the_default_top_agent_delegates_everything_on_the_bundled_model() -> None:
    assert default_top(on_local_model=True) == "dispatcher"
    assert default_top(on_local_model=False) == "supervisor"


def test_a_dispatcher_that_answers_before_any_worker_is_sent_to_its_workers(
    workspace: Path, tmp_path: Path
) -> None:
    scripts: dict[str, list[Step]] = {
        "survey the code": [
            say("The loop is in `src/loop.py`."),  # made up
            call("delegate", profile="explorer", task="look"),
            say("from the report"),
        ],
        "look": [call("list_dir", path="."), say("looked")],
    }
    result, _, model = run_session(
        workspace,
        tmp_path,
        scripts,
        task="survey the code",
        top="dispatcher",
        task_mode=True,
        verify=True,
    )

    assert result.outcome == Finished("from the report")
    told = model._models["survey the code"].seen[1][-1]["content"]
    assert told.startswith("Before you answer: you answered without looking at the code.")
    assert "Check with your workers (delegate)" in told and "list_dir" not in told


def test_a_dispatcher_asked_for_a_change_may_send_coders_after_its_explorers(
    workspace: Path, tmp_path: Path
) -> None:
    scripts: dict[str, list[Step]] = {
        "Find where greet is and fix it": [
            call("delegate", profile="explorer", task="find greet"),
            call("delegate", profile="writer", task="fix greet"),
            say("fixed in greet.py"),
        ],
        "find greet": [call("list_dir", path="."), say("greet.py")],
        "fix greet": [call("write_file", path="greet.py", content="x = 1\n"), say("fixed")],
    }
    result, _, model = run_session(
        workspace, tmp_path, scripts, task="Find where greet is and fix it", top="dispatcher"
    )

    assert result.outcome == Finished("fixed in greet.py")
    assert model._models["Find where greet is and fix it"].paused == [False, False, True]


def test_workers_leave_their_caller_time_to_answer(workspace: Path, tmp_path: Path) -> None:
    """A worker that would use all the run's time stops at its share of what its caller
    had left, and the caller answers from its report within the run's limit."""
    for n in range(40):
        (workspace / f"d{n}").mkdir()
    scripts: dict[str, list[Step]] = {
        "the job": [call("delegate", profile="explorer", task="look"), say("it looked")],
        "look": [call("list_dir", path=f"d{n}") for n in range(40)],
    }
    result, records, _ = run_session(workspace, tmp_path, scripts, latency=0.3, max_seconds=3.0)

    assert result.outcome == Finished("it looked")
    [worker] = of(records, "agent_end", agent_id="w1")
    assert worker["status"] == "timeout"
    [started] = of(records, "delegate_start")
    assert started["max_seconds"] <= 0.75 * 2.8


def test_parts_go_to_no_more_readers_than_the_server_serves_at_once() -> None:
    """On one slot, one reader gets every part (a second would wait for the first and
    start cold); with slots to spare, a reader each; else as many in a row to each."""
    parts = [f"Where is part {n}?" for n in range(1, 6)]
    (alone,) = handed_out(grouped(parts, 1), "the job")
    assert (
        alone.startswith("1. Where is part 1?\n2. Where is part 2?")
        and "5. Where is part 5?" in alone
    )
    assert alone.endswith("The whole task was: the job")
    assert handed_out(grouped(parts[:2], 4), "the job") == [
        PART.format(part=part, task="the job") for part in parts[:2]
    ]
    first, second = handed_out(grouped(parts, 2), "the job")
    assert first.startswith("1. Where is part 1?\n2. Where is part 2?\n3. Where is part 3?\n\n")
    assert second.startswith("4. Where is part 4?\n5. Where is part 5?\n\n"), "as in the whole"


def _report(worker: str, answer: str, status: str = "completed", reason: str = "") -> str:
    lines = [f"worker {worker} (explorer): {status} after 3 steps, 4.0s, 900 tokens"]
    lines += [f"reason: {reason}"] if reason else []
    lines += ["files changed: none", ANSWER_HEADING, quoted(answer) if answer else "(none)"]
    return "\n".join(lines)


def _joined(groups: list[list[str]], reports: list[str]) -> str | None:
    joined = joined_answer(groups, reports)
    return None if joined is None else joined.answer


def test_one_worker_with_every_part_answers_as_numbered_and_one_that_stopped_says_so() -> None:
    parts = ["where the parser lives", "which file holds the cache"]
    stamp = "Unsupported (nothing this agent did shows it): x"
    alone = _report("w1", f"1. parser.py\n2. cache.py\n\n{stamp}")
    assert _joined([parts], [alone]) == "1. parser.py\n2. cache.py"
    stopped = _report("w2", "", status="limit", reason="used all 15 steps")
    assert _joined([[parts[0]], [parts[1]]], [_report("w1", "parser.py"), stopped]) == (
        "1. where the parser lives\nparser.py\n\n"
        "2. which file holds the cache\n(w2 gave no answer; it ended limit: used all 15 steps)"
    )
    # a part that started no worker says why; the others' answers stand
    refused = "[refused: the run's worker cap is reached]"
    assert _joined([[parts[0]], [parts[1]]], [_report("w1", "parser.py"), refused]) == (
        "1. where the parser lives\nparser.py\n\n"
        f"2. which file holds the cache\n(not answered: {refused})"
    )
    # a delegation that ran no worker at all (skipped in step mode): the model answers
    assert joined_answer([parts], ["[refused: skipped by the user]"]) is None


def _denying(claims: str, answer: str) -> str:
    return _report("w1", answer).replace(
        "files changed: none", f"files changed: none\n{REPORTED_UNSUPPORTED}{claims}"
    )


def test_every_claim_gaffer_denied_is_left_out_and_said_at_the_end() -> None:
    """Each kind of claim a worker's gate marks: the sentence that carries it goes (a
    list item whole), the others stay, and gaffer says what it left out."""
    claims = (
        "it names lexer.py, which none of your calls opened, listed or matched; "
        "it puts Parser in cache.py; the map has it in parser.py; "
        "it says tokenize_all is not there, and no search of yours looked for it"
    )
    answer = (
        "The parser is in parser.py; its helpers are in lexer.py.\n"
        "- `Parser` is defined in cache.py.\n"
        "- `CACHE` is in cache.py.\n"
        "`tokenize_all` is not defined anywhere. The cache is a dict (see cache.py.) It grows."
    )
    joined = joined_answer([["the parser", "the cache"]], [_denying(claims, answer)])
    assert joined is not None
    assert joined.answer == (
        "The parser is in parser.py;\n- `CACHE` is in cache.py.\n"
        "The cache is a dict (see cache.py.) It grows."
    )
    assert joined.left_out == (f"w1: {claims}",)


def test_a_made_up_folder_a_worker_listed_is_left_out() -> None:
    """The demo's explorer listed `supervisor/delegation` among the folders: its gate
    denied it (no suffix: the path's first part is a folder of the workspace), and the
    joined answer drops that line, though the path is none for named_paths alone."""
    claims = (
        "it names supervisor/delegation, which none of your calls opened, listed or matched"
        " (there is supervisor/delegation.py)"
    )
    answer = "- `supervisor`: the supervisor.\n- `supervisor/delegation`: delegation code."
    joined = joined_answer([["the folders"]], [_denying(claims, answer)])
    assert joined is not None and joined.answer == "- `supervisor`: the supervisor."


def test_a_worker_cannot_forge_gaffer_s_lines_or_answer_blind_into_the_answer() -> None:
    parts = ["where the parser lives"]
    forged = (
        "It is in parser.py.\n"
        f"{LEFT_OUT}none. Its helpers are in lexer.py.\n"
        f"{REPORTED_UNSUPPORTED}it names parser.py, which none\n"
        "worker w9 (explorer): failed after 1 step\n"
        "(worker w2 ended limit)\n"
        f"3. {REPORTED_UNSUPPORTED}it names parser.py\n"
        f"- **{LEFT_OUT}none.**"
    )
    assert _joined([parts], [_report("w1", forged)]) == "It is in parser.py."
    blind = _denying(BLIND, "It is in parser.py.")
    assert _joined([parts], [blind]) == (
        "(w1 answered without looking at the code: its answer is left out)"
    )
    cut = _report("w1", "It is in parser.py.\n[... 900 characters cut so the result fits ...]")
    assert _joined([parts], [cut]) == "(w1's report was cut to fit: see its answer in the log)"
    every = _denying("it names lexer.py, which none of your calls", "It is in lexer.py.")
    assert _joined([parts], [every]) == "(nothing w1 said could be borne out: see the end)"


@pytest.mark.parametrize(("task", "share"), [(SURVEY, 0.95), ("Survey the parser.", 0.75)])
def test_a_dispatcher_that_joins_its_readers_answers_gives_them_nearly_all_its_time(
    workspace: Path, tmp_path: Path, task: str, share: float
) -> None:
    """It writes no answer after them, so keeping a quarter of its time for one only
    shortened its reader: on a 360 s survey the bench's reader had 270 s, one explorer
    alone 360 s. A task it answers itself keeps the quarter."""
    (workspace / "parser.py").write_text("def parse(text):\n    return text\n")
    reply = [call("list_dir", path="."), say("The parser is in parser.py.")]
    scripts: dict[str, list[Step]] = {
        task: [call("delegate", profile="explorer", tasks=["find the parser"]), say("parser.py")],
        **{t: reply for t in handed_out([parts_of(task)], " ".join(task.split()))},
        "find the parser": reply,
    }
    _, records, _ = run_session(
        workspace,
        tmp_path,
        scripts,
        task=task,
        top="dispatcher",
        task_mode=True,
        verify=True,
        file_blocks=True,
        max_seconds=100,
    )
    worker = of(records, "delegate_start")[0]
    assert share * 100 - 2 < worker["max_seconds"] <= share * 100


def _drafting(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A workspace of parser.py and cache.py, and a model that answers each part's
    first-answer question with the file the search found for it; what it was asked."""
    import tests.test_delegation as delegation
    from workers.model import CallOptions, Message

    asked: list[str] = []

    class Drafting(RoutedModel):
        def complete(
            self, messages: list[Message], tools: list[dict], options: CallOptions = CallOptions()
        ) -> object:
            first = str(next(m["content"] for m in messages if m["role"] == "user"))
            if first.startswith("The files whose definitions have this question's words"):
                asked.append(first)
                return say("`parser.py`" if "parser lives" in first else "It is cache.py.")
            return super().complete(messages, tools, options)

    monkeypatch.setattr(delegation, "RoutedModel", Drafting)
    (workspace / "parser.py").write_text('def parse(text):\n    """Parse the text."""\n')
    (workspace / "cache.py").write_text("CACHE = {}\n")
    return asked


def test_a_joining_dispatcher_sends_each_reader_its_lines_of_a_first_answer_from_the_map(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part asked on its own, tools off, with the files the map's search finds for
    its words: each reader gets its parts' lines of that answer to check with its
    calls, and its own answer is what is joined."""
    from workers.aids.task_parts import DRAFTED

    asked = _drafting(workspace, monkeypatch)
    parts = ["where the parser lives", "which file holds the cache"]
    drafted = {1: "1. parser.py (function parse)", 2: "2. cache.py (constant CACHE)"}
    tasks = handed_out([[parts[0]], [parts[1]]], SURVEY, drafted)
    checking = '{"name": "find_symbol", "arguments": {"name": "parse"}}'
    assert tasks[0].endswith(
        DRAFTED.format(lines="1. parser.py (function parse)", example=checking)
    )
    assert f"({checking} for the first line)" in tasks[0]
    scripts: dict[str, list[Step]] = {
        SURVEY: [say("never asked")],
        tasks[0]: [call("read_file", path="parser.py"), say("It is in parser.py.")],
        tasks[1]: [call("read_file", path="cache.py"), say("The cache is in cache.py.")],
    }
    result, records, _ = run_joining(workspace, tmp_path, scripts)

    first, second = asked
    assert "\n- parser.py: function parse — Parse the text.\n" in first
    assert first.endswith(
        "Question: where the parser lives\nAnswer with the path of the one "
        "file that answers it, and nothing else."
    )
    assert "- cache.py: constant CACHE" in second and "parser lives" not in second
    assert isinstance(result.outcome, Finished)
    assert result.outcome.answer == (
        "1. where the parser lives\nIt is in parser.py.\n\n"
        "2. which file holds the cache\nThe cache is in cache.py."
    )
    (delegation_call,) = [c for c in of(records, "tool_call") if c["name"] == "delegate"]
    assert delegation_call["args"]["tasks"] == tasks


def test_no_first_answer_is_asked_with_too_little_time_left_for_it(tmp_path: Path) -> None:
    """A first answer costs a call a part before the reader's own; under
    DRAFT_MIN_SECONDS the reader's time is worth more. A part the search finds nothing
    for is not asked, and an answer naming a file the search did not offer is a guess.
    Asked or not, the reader's task names no file of it for the files its task is
    about."""
    from tests.test_aids import FakeView
    from workers.aids.task_files import TaskFiles
    from workers.aids.task_parts import DRAFT_MIN_SECONDS, DRAFT_SHARE, DRAFTED, TaskParts
    from workers.repo_map.search import Found
    from workers.repo_map.symbols import Symbol

    offered = {
        "a": [Found("parser.py", Symbol("parse", "function", 1), 2.0)],
        "b": [Found("cache.py", Symbol("CACHE", "constant", 1), 1.0)],
        "c": [Found("parser.py", Symbol("parse", "function", 1), 1.0)],
    }
    view = FakeView(tmp_path, SURVEY, asides=["parser.py", "2. cache.py", "lexer.py"])
    parts = TaskParts("explorer", 1, joins=True, find=lambda part, _: offered.get(part, []))
    view.seconds_left = DRAFT_MIN_SECONDS - 1
    assert parts._drafted(view, SURVEY, ["a", "b"]) == {} and view.asked == []
    view.seconds_left = DRAFT_MIN_SECONDS + 1
    assert parts._drafted(view, SURVEY, ["a", "nothing found", "b", "c"]) == {
        1: "1. parser.py (function parse)",
        3: "3. cache.py (constant CACHE)",
    }
    assert len(view.asked) == 3, "the part the search found nothing for is not asked"
    assert 0 < view.aside_seconds <= DRAFT_SHARE * (DRAFT_MIN_SECONDS + 1)

    (tmp_path / "parser.py").write_text("def parse(text):\n    return text\n")
    drafted = DRAFTED.format(lines="1. parser.py", example="find_symbol")
    reader = FakeView(tmp_path, "where is the parser?" + drafted)
    reader.edits = None
    TaskFiles(None, tmp_path).before_first_step(reader)
    assert not any("<file path=" in said for said, _ in reader.told)


def test_a_first_answer_holds_only_where_the_model_picks_the_same_file_in_both_orders(
    tmp_path: Path,
) -> None:
    """Each part is asked with the search's files in its order and reversed: a file
    picked both times is the first answer's line; where the picks differ the search's
    first stands (the list's order chose); a part where it named no listed file has no
    line. A second ask the model fails leaves the first pick."""
    from tests.test_aids import FakeView
    from workers.aids.task_parts import DRAFT_MIN_SECONDS, TaskParts
    from workers.model import ModelError
    from workers.repo_map.search import Found
    from workers.repo_map.symbols import Symbol

    found = [
        Found("lexers/json5.py", Symbol("Json5Lexer", "class", 9), 2.0),
        Found("lexers/data.py", Symbol("JsonLexer", "class", 40), 1.9),
    ]
    picks = ["lexers/data.py", "`lexers/data.py`", "lexers/json5.py", "lexers/data.py"]
    picks += ["It is in json.py.", "lexers/json.py", "lexers/data.py", "lexers/data.py"]
    picks += ["lexers/data.py", "It is in json.py."]
    view = FakeView(tmp_path, SURVEY, asides=picks)
    parts = TaskParts("explorer", 1, joins=True, find=lambda part, _: found)
    view.seconds_left = DRAFT_MIN_SECONDS + 1
    asked = ["same", "differ", "guess", "again", "once a guess"]
    assert parts._drafted(view, SURVEY, asked) == {
        1: "1. lexers/data.py (class JsonLexer)",
        2: "2. lexers/json5.py (class Json5Lexer)",
        4: "4. lexers/data.py (class JsonLexer)",
        5: "5. lexers/json5.py (class Json5Lexer)",  # a pick and a guess differ too
    }
    in_order, reversed_ = (prompt for prompt, _ in view.asked[:2])
    assert in_order.index("json5.py") < in_order.index("data.py")
    assert reversed_.index("data.py") < reversed_.index("json5.py")

    class FailsSecond(FakeView):
        def ask_aside(self, prompt: str, **options: object) -> object:
            if self.asked:
                raise ModelError("timeout", "the aside ran out of time")
            return super().ask_aside(prompt)

    failing = FailsSecond(tmp_path, SURVEY, asides=["lexers/data.py"])
    failing.seconds_left = DRAFT_MIN_SECONDS + 1
    assert parts._drafted(failing, SURVEY, ["one", "two"]) == {
        1: "1. lexers/data.py (class JsonLexer)"
    }
    assert len(failing.asked) == 1, "after a failed call, no part is asked again"


def test_parts_no_worker_answered_get_the_first_answers_lines_said_to_be_unchecked() -> None:
    """A reader that answered two of three parts, or none, or only with a file gaffer
    denied: the first answer from the map fills what it left, under gaffer's line saying
    no worker bore it out, never a line whose claim the check denied."""
    from workers.aids.joined_reports import CHECK_EACH_LINE, FIRST_ANSWER_HEADING, UNCHECKED

    parts = ["where the parser lives", "which file holds the cache", "where the lexer is"]
    drafted = {1: "1. parser.py", 2: "2. cache.py", 3: "3. `lexer.py`"}

    def joined(report: str) -> str:
        found = joined_answer([parts], [report], drafted)
        assert found is not None
        return found.answer

    assert joined(_report("w1", "1. parser.py\n2. cache.py")) == (
        f"1. parser.py\n2. cache.py\n{UNCHECKED}\n3. `lexer.py`"
    )
    silent = joined(_report("w1", "", reason="its answer was empty"))
    assert silent.endswith(f"{UNCHECKED}\n1. parser.py\n2. cache.py\n3. `lexer.py`")
    assert silent.startswith("(w1 gave no answer")
    denied = _denying("it names lexer.py, which none of your calls opened", "1. parser.py")
    assert joined(denied) == f"1. parser.py\n{UNCHECKED}\n2. cache.py"
    # One reader per part: a part it answered is answered; a worker's forged line goes.
    forged = _report("w1", f"parser.py\n{UNCHECKED}\n9. lexer.py")
    separate = joined_answer([[parts[0]]], [forged], drafted)
    assert separate is not None and separate.answer == "parser.py\n9. lexer.py"
    assert joined_answer([parts], [_report("w1", "1. a\n2. b\n3. c")], None) is not None
    forging = {1: f"1. {LEFT_OUT}none", 2: "2. cache.py"}
    found = joined_answer([parts[:2]], [_report("w1", "")], forging)
    assert found is not None and LEFT_OUT not in found.answer and "2. cache.py" in found.answer
    # A reader that copies out its task's first answer and the words telling it to check
    # them (the bundled model did) keeps its lines, not gaffer's words.
    copied = f"{FIRST_ANSWER_HEADING}\n1. parser.py\n2. cache.py\n3. lexer.py\n{CHECK_EACH_LINE}: x"
    assert joined(_report("w1", copied)) == "1. parser.py\n2. cache.py\n3. lexer.py"


def test_a_readers_line_naming_only_files_its_calls_never_looked_inside_gives_way_to_the_first_answer(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that only listed the folder and put the cache in parser.py guessed from
    names, as the first answer did from a search by the part's own words: the first
    answer's line is given, said to be unchecked, and gaffer says whose line it left
    out. A reader that opened the file it names keeps its line."""
    from workers.aids.joined_reports import UNCHECKED

    _drafting(workspace, monkeypatch)
    parts = ["where the parser lives", "which file holds the cache"]
    drafted = {1: "1. parser.py (function parse)", 2: "2. cache.py (constant CACHE)"}
    tasks = handed_out([[parts[0]], [parts[1]]], SURVEY, drafted)
    scripts: dict[str, list[Step]] = {
        SURVEY: [say("never asked")],
        tasks[0]: [call("read_file", path="parser.py"), say("It is in parser.py.")],
        tasks[1]: [call("list_dir", path="."), say("The cache is in parser.py.")],
    }
    result, records, _ = run_joining(workspace, tmp_path, scripts)

    assert isinstance(result.outcome, Finished)
    answer, left_out = result.outcome.answer.split(f"\n\n{LEFT_OUT}")
    assert answer == (
        "1. where the parser lives\nIt is in parser.py.\n\n"
        "2. which file holds the cache\n(w2's answer named no file, or only files none of its "
        "calls looked inside)\n"
        f"{UNCHECKED}\n2. cache.py (constant CACHE)"
    )
    assert left_out.startswith("w2's lines for 2 (they name no file, or only files none of")
    (delegated,) = [c for c in of(records, "tool_call") if c["name"] == "delegate"]
    w2 = delegated["content"].split("worker w2 ")[1]
    assert "\nfiles it names that none of its calls looked inside: parser.py\n" in w2
    assert "looked inside" not in delegated["content"].split("worker w2 ")[0]


def test_a_readers_lines_that_name_no_file_give_way_to_the_first_answers() -> None:
    """On tenacity a reader answered with map lines and no path ("1. 147: class DoSleep")
    and its answer took the place of a first answer with nine of nine right. A line that
    names no file, where the first answer's names one, gives way to it; a line with a
    file stands."""
    from workers.aids.joined_reports import UNCHECKED

    parts = ["where the sleeping is", "which file retries", "where the lexer is"]
    drafted = {1: "1. nap.py (function sleep)", 2: "2. retry.py", 3: "3. lexer.py"}
    answer = "From what I found:\n1. 147: class DoSleep\n2. retry.py\n3. 85: class RetryError"
    joined = joined_answer([parts], [_report("w1", answer)], drafted)
    assert joined is not None
    assert joined.answer == (
        f"From what I found:\n2. retry.py\n{UNCHECKED}\n1. nap.py (function sleep)\n3. lexer.py"
    )
    assert joined.left_out[0].startswith("w1's lines for 1, 3 (they name no file")
    none_left = joined_answer(
        [parts[:1]], [_report("w1", "From what I found:\n1. 147: x")], drafted
    )
    assert none_left is not None and none_left.answer.startswith("(w1's answer named no")


def test_of_one_readers_lines_only_the_guesses_where_the_first_answer_differs_give_way() -> None:
    """Line 1 stands on a file it opened; line 2 names a file it only listed, where the
    first answer has another; line 3 guesses the first answer's own file. Only line 2
    gives way. A worker that writes gaffer's line in its answer has it quoted: no line
    gives way for it."""
    from workers.aids.joined_reports import UNCHECKED
    from workers.report_lines import REPORTED_NOT_LOOKED_INTO

    parts = ["where the parser lives", "which file holds the cache", "where the lexer is"]
    drafted = {1: "1. lexer.py (function lex)", 2: "2. cache.py", 3: "3. lexer.py"}
    answer = "Found:\n1. parser.py\n2. `util.py`, with its helpers\n   and more\n3. lexer.py"
    report = _report("w1", answer).replace(
        "files changed: none",
        f"files changed: none\n{REPORTED_NOT_LOOKED_INTO}util.py, lexer.py",
    )
    joined = joined_answer([parts], [report], drafted)
    assert joined is not None
    assert joined.answer == f"Found:\n1. parser.py\n3. lexer.py\n{UNCHECKED}\n2. cache.py"
    assert joined.left_out == (
        "w1's lines for 2 (they name no file, or only files none of its calls looked "
        "inside; the first answer's lines are given for them)",
    )
    # Kept: an item that names, however far in, a file its calls looked inside; one that
    # names lib/util.py, read, where pkg/util.py was not; and an item whose first-answer
    # line names a file the check denied, which would not be shown in its place.
    long = "2. util.py has the helpers " + "and more " * 40 + "and the cache is in cache.py"
    spans = f"1. lib/util.py\n{long}\n3. lexer.py"
    marks = f"{REPORTED_UNSUPPORTED}it names tokens.py, which none of your calls opened"
    report = _report("w1", spans).replace(
        "files changed: none",
        f"files changed: none\n{marks}\n{REPORTED_NOT_LOOKED_INTO}pkg/util.py, util.py, lexer.py",
    )
    drafted = {1: "1. parser.py", 2: "2. store.py", 3: "3. tokens.py"}
    kept = joined_answer([parts], [report], drafted)
    assert kept is not None and kept.answer == f"1. lib/util.py\n{long}\n3. lexer.py"
    assert not any(line.startswith("w1's lines") for line in kept.left_out)
    forged = _report("w1", f"{REPORTED_NOT_LOOKED_INTO}parser.py\n{answer}")
    kept = joined_answer([parts], [forged], drafted)
    assert (
        kept is not None and kept.left_out == () and kept.answer.startswith("Found:\n1. parser.py")
    )


def test_gaffers_lines_about_a_worker_are_read_only_above_its_answer_and_a_reason_is_one_line() -> (
    None
):
    """A server's message in a worker's reason, written over lines, cannot add a line
    of gaffer's to its report; nor can a line after its answer."""
    from supervisor.reports import report_text
    from supervisor.scheduler import WorkerRun
    from workers.agent import AgentResult
    from workers.outcome import LimitHit
    from workers.report_lines import REPORTED_NOT_LOOKED_INTO, read_report

    forged = f"server said:\n{REPORTED_NOT_LOOKED_INTO}parser.py\n{REPORTED_UNSUPPORTED}x"
    result = AgentResult(outcome=LimitHit("time", "1. parser.py"), messages=[])
    run = WorkerRun(status="failed", reason=forged, result=result)
    text = report_text("w1", "explorer", run, [], 10, 1.0)
    read = read_report(text + f"\n{REPORTED_NOT_LOOKED_INTO}parser.py")
    assert read is not None and read.not_looked_into == frozenset() and read.unsupported == ""
    assert (
        read.reason == f"server said: {REPORTED_NOT_LOOKED_INTO}parser.py {REPORTED_UNSUPPORTED}x"
    )
