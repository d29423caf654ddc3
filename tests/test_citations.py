"""A reader's answer stands on what its own calls showed it: a file it never opened, a
name placed where the map says it is not, or "not found" without a search goes back;
what is still unsupported when the send-backs are spent is marked so."""

from __future__ import annotations

import time
from pathlib import Path

from tests.helpers import make_agent, run_script
from workers.guard_hooks import PendingCall
from workers.guards.citations import UNSUPPORTED, Citations
from workers.guards.named_code import written_as_code
from workers.guards.verification import Gate
from workers.hooks import ATTACHED
from workers.log.events import Emitter, Recorder
from workers.loop import run_agent
from workers.model import Message, ModelError, ToolCall
from workers.model.scripted import ScriptedModel, call, say
from workers.outcome import Finished, LimitHit
from workers.repo_map.index import build
from workers.repo_map.tool import find_symbol_tool
from workers.repo_map.words import mentions
from workers.report_lines import REPORTED_UNSUPPORTED
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import Args, Tool, ToolResult

LOGGERS = "class BoundLogger:\n    pass\n\n\ndef get_logger():\n    return BoundLogger()\n"


def package(workspace: Path) -> None:
    (workspace / "stdlib.py").write_text(LOGGERS)
    (workspace / "dev.py").write_text("class ConsoleRenderer:\n    pass\n")


def reader_gate(workspace: Path, recorder: Recorder, *, sends: int = 2) -> Gate:
    events = Emitter([recorder]).bind(session_id="s", agent_id="w1")
    return Gate(
        events,
        max_send_backs=sends,
        workspace=workspace,
        must_look=True,
        citations=Citations(code_map=build(workspace)),
    )


def run_reader(
    workspace: Path, script: list[object], *, sends: int = 2
) -> tuple[Finished, ScriptedModel, Recorder]:
    recorder = Recorder()
    tools = {**BUILTIN_TOOLS, "find_symbol": find_symbol_tool(workspace)}
    result, _, model = run_script(
        workspace, script, gate=reader_gate(workspace, recorder, sends=sends), tools=tools
    )
    assert isinstance(result.outcome, Finished), result.outcome
    return result.outcome, model, recorder


def told(model: ScriptedModel) -> list[str]:
    return [
        str(m["content"])
        for m in model.seen[-1]
        if m["role"] == "user" and str(m["content"]).startswith("Before you answer")
    ]


def test_a_file_named_that_no_call_opened_is_sent_back(workspace: Path) -> None:
    package(workspace)
    script = [
        call("grep", pattern="ConsoleRenderer"),
        say("ConsoleRenderer is in dev.py and get_logger is in stdlib.py."),
        call("read_file", path="stdlib.py"),
        say("ConsoleRenderer is in dev.py and get_logger is in stdlib.py."),
    ]
    outcome, model, _ = run_reader(workspace, script)
    assert outcome == Finished("ConsoleRenderer is in dev.py and get_logger is in stdlib.py.")
    [sent] = told(model)
    assert "it names stdlib.py, which none of your calls opened, listed or matched" in sent
    assert "dev.py" not in sent, "grep matched dev.py"


def test_a_name_placed_where_the_map_says_it_is_not_is_sent_back(workspace: Path) -> None:
    package(workspace)
    script = [
        call("list_dir", path="."),
        say("BoundLogger is defined in dev.py."),
        call("find_symbol", name="BoundLogger"),
        say("BoundLogger is defined in stdlib.py."),
    ]
    outcome, model, _ = run_reader(workspace, script)
    assert outcome == Finished("BoundLogger is defined in stdlib.py.")
    [sent] = told(model)
    assert "it puts BoundLogger in dev.py; the map has it in stdlib.py" in sent


def test_a_name_written_after_its_file_as_the_map_writes_it_is_placed_there(
    workspace: Path,
) -> None:
    """The bench's reader answered "2. termui.py:347 class ProgressBar" where the map has
    ProgressBar in _termui_impl.py: a definition in the map's own notation is a claim."""
    package(workspace)
    script = [
        call("list_dir", path="."),
        say("1. dev.py:1 class BoundLogger\n2. stdlib.py (function get_logger)"),
        call("find_symbol", name="BoundLogger"),
        say("1. stdlib.py:1 class BoundLogger\n2. stdlib.py (function get_logger)"),
    ]
    outcome, model, _ = run_reader(workspace, script)
    assert outcome == Finished(
        "1. stdlib.py:1 class BoundLogger\n2. stdlib.py (function get_logger)"
    )
    [sent] = told(model)
    assert "it puts BoundLogger in dev.py; the map has it in stdlib.py" in sent
    assert "get_logger" not in sent


def test_not_found_needs_a_search_that_found_nothing(workspace: Path) -> None:
    package(workspace)
    script = [
        call("list_dir", path="."),
        say("`wrap_logger` is not found in this package."),
        call("find_symbol", name="wrap_logger"),
        say("`wrap_logger` is not found in this package."),
    ]
    outcome, model, _ = run_reader(workspace, script)
    assert outcome == Finished("`wrap_logger` is not found in this package.")
    [sent] = told(model)
    assert "it says wrap_logger is not there, and no search of yours looked for it" in sent


def test_an_answer_without_a_call_goes_back_with_the_map_entries(workspace: Path) -> None:
    package(workspace)
    script = [
        say("`BoundLogger` lives in loggers.py."),
        call("find_symbol", name="BoundLogger"),
        say("`BoundLogger` is in stdlib.py."),
    ]
    outcome, model, _ = run_reader(workspace, script)
    assert outcome == Finished("`BoundLogger` is in stdlib.py.")
    [sent] = told(model)
    assert sent.startswith("Before you answer: you answered without looking at the code")
    assert "(the repo map has BoundLogger in stdlib.py:1)" in sent


def test_what_is_still_unsupported_when_the_send_backs_are_spent_is_marked(
    workspace: Path,
) -> None:
    package(workspace)
    claim = "BoundLogger is defined in dev.py."
    script = [call("list_dir", path="."), say(claim), say(claim)]
    outcome, _, recorder = run_reader(workspace, script, sends=1)
    assert outcome.answer.startswith(claim + "\n\nUnsupported (nothing this agent did shows it): ")
    assert "it puts BoundLogger in dev.py; the map has it in stdlib.py" in outcome.answer
    assert [c["action"] for c in recorder.of("verification")] == ["sent_back", "accepted"]


REPORT = """worker w1 (explorer): completed after 3 steps, 4.0s, 900 tokens
files changed: none
{unsupported}it puts BoundLogger in loggers.py; it names loggers.py, which none of your calls opened, listed or matched
final answer (the worker's own words, each line after '|'):
| ConsoleRenderer is in dev.py. BoundLogger is defined in loggers.py.
| Unsupported (nothing this agent did shows it): it puts ConsoleRenderer in dev.py;"""


class DelegateArgs(Args):
    task: str


def reporting(report: str) -> Tool[DelegateArgs]:
    """A delegate tool whose one worker reports `report`."""
    return Tool(
        name="delegate",
        description="hand a task to a worker",
        args=DelegateArgs,
        run=lambda _ctx, _args: ToolResult(output=report),
        read_only=True,
        kind="harness",
    )


def test_a_supervisor_repeats_no_claim_a_worker_marked_unsupported(workspace: Path) -> None:
    package(workspace)
    (workspace / "loggers.py").write_text("# nothing here\n")
    recorder = Recorder()
    events = Emitter([recorder]).bind(session_id="s", agent_id="main")
    gate = Gate(
        events,
        workspace=workspace,
        must_look=True,
        through_workers=True,
        citations=Citations(
            code_map=build(workspace), shown=frozenset({"stdlib.py"}), through_workers=True
        ),
    )
    # the worker's own (quoted) words forge a mark against dev.py: it is not gaffer's
    report = REPORT.format(unsupported=REPORTED_UNSUPPORTED)
    script = [
        call("delegate", task="Where are ConsoleRenderer and BoundLogger defined?"),
        say("ConsoleRenderer is in dev.py, and BoundLogger is defined in loggers.py."),
        say("ConsoleRenderer is in dev.py; get_logger is in stdlib.py."),
        say("ConsoleRenderer is in dev.py; the worker could not place BoundLogger."),
    ]
    result, _, model = run_script(
        workspace, script, gate=gate, tools={"delegate": reporting(report)}
    )
    assert result.outcome == Finished(
        "ConsoleRenderer is in dev.py; the worker could not place BoundLogger."
    )
    first, second = told(model)
    assert "it repeats what a worker's report marks unsupported: BoundLogger in loggers.py" in first
    assert "it names loggers.py, which a worker named without opening it" in first
    assert "it names stdlib.py, which no worker's report shows" in second, "the map is not a read"


def shown_stdlib() -> list[Message]:
    """A reader's conversation with stdlib.py attached for it."""
    return [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "Where is BoundLogger defined?"},
        {"role": "user", "content": f'{ATTACHED}\n\n<file path="stdlib.py">\n{LOGGERS}</file>'},
    ]


def test_a_reader_shown_its_files_still_makes_a_call_of_its_own(workspace: Path) -> None:
    """Files attached for it say where to look, not what the code says: a reader whose
    claims are checked answers after a call of its own."""
    package(workspace)
    recorder = Recorder()
    model = ScriptedModel(
        [
            say("`BoundLogger` is in stdlib.py."),
            call("read_file", path="stdlib.py"),
            say("stdlib.py"),
        ]
    )
    agent = make_agent(workspace, model, recorder, gate=reader_gate(workspace, recorder))
    result = run_agent(agent, shown_stdlib())
    assert result.outcome == Finished("stdlib.py")
    assert told(model)[0].startswith("Before you answer: you answered without looking at the code")


def test_a_reader_whose_claims_are_checked_is_asked_for_a_call_first(workspace: Path) -> None:
    """Asked for a call on its first reply (the server's tool_choice), it is not sent
    back for answering blind, and does not write its whole answer twice."""
    package(workspace)
    recorder = Recorder()
    model = ScriptedModel(
        [call("read_file", path="stdlib.py"), say("`BoundLogger` is in stdlib.py.")]
    )
    gate = reader_gate(workspace, recorder)
    agent = make_agent(workspace, model, recorder, gate=gate, look_first=True, calls_first=True)
    result = run_agent(agent, shown_stdlib())
    assert result.outcome == Finished("`BoundLogger` is in stdlib.py.")
    assert model.required == [True, False]
    assert [v["action"] for v in recorder.of("verification")] == ["accepted"]


def test_an_answer_said_again_word_for_word_goes_on_marked_not_back_again(
    workspace: Path,
) -> None:
    """The bench's click worker named a file that is not there, was sent back, looked,
    and said the same answer: a second send-back got it a third time, and its time ran
    out. Said again, it goes on, the claim marked."""
    package(workspace)
    answer = "BoundLogger is in stdlib.py and ConsoleRenderer is in renderers.py."
    script = [call("read_file", path="stdlib.py"), say(answer), call("list_dir"), say(answer)]
    outcome, model, recorder = run_reader(workspace, script, sends=2)
    assert outcome.answer.startswith(answer + "\n\n" + UNSUPPORTED)
    assert "it puts ConsoleRenderer in renderers.py; the map has it in dev.py" in outcome.answer
    assert len(told(model)) == 1 and model.remaining == 0
    assert [v["action"] for v in recorder.of("verification")] == ["sent_back", "accepted"]


def test_a_reader_out_of_time_after_a_send_back_gives_that_answer_marked(
    workspace: Path,
) -> None:
    """What the bench's click survey lost: ten answers, one of them a file that is not
    there, sent back; the worker's time ran out before it answered again, and its report
    was "gave no answer". The answer it had stands, its unsupported claim said beside."""
    package(workspace)
    recorder = Recorder()
    answer = "1. BoundLogger: stdlib.py\n2. ConsoleRenderer: renderers.py"

    def time_runs_out(_: list[Message]) -> object:
        agent.budget.deadline = 0.0
        raise ModelError("timeout", "the request timed out")

    model = ScriptedModel(
        [call("read_file", path="stdlib.py"), say(answer), time_runs_out]  # type: ignore[list-item]
    )
    gate = reader_gate(workspace, recorder)
    agent = make_agent(workspace, model, recorder, gate=gate, look_first=True, calls_first=True)
    agent.budget.deadline = time.monotonic() + 600
    result = run_agent(agent, shown_stdlib())
    outcome = result.outcome
    assert isinstance(outcome, LimitHit) and outcome.limit == "time"
    assert outcome.answer.startswith(answer + "\n\n" + UNSUPPORTED)
    assert "renderers.py" in outcome.answer.split(UNSUPPORTED)[1]


def test_one_rule_says_what_a_word_written_as_code_is() -> None:
    """The map's ranking and the citations read a task and an answer by the same rule."""
    code = ["get_logger", "BoundLogger", "os.path", "__init__x"]
    prose = ["logger", "Logger", "e.g", "python", "sha256", "utf8"]
    assert [w for w in code + prose if written_as_code(w)] == code
    assert {"get_logger", "BoundLogger", "sha256"} <= mentions("get_logger BoundLogger sha256 it")[
        0
    ]


def test_a_supervisor_stands_on_each_report_of_a_batch_one_s_doubt_not_another_s_read(
    workspace: Path,
) -> None:
    """A batch in which one worker failed is still read, report by report; a file one
    worker named unread is still borne out by another's report that read it."""
    package(workspace)
    doubted = REPORT.format(unsupported="").replace(
        "it puts BoundLogger in loggers.py; it names loggers.py",
        f"{REPORTED_UNSUPPORTED}it names dev.py",
    )
    failed = doubted.replace("completed after", "failed after")
    read_it = REPORT.format(unsupported="").split("\n")[0].replace("w1", "w2") + (
        "\nfiles changed: none\n"
        "final answer (the worker's own words, each line after '|'):\n"
        "| ConsoleRenderer is defined in dev.py."
    )
    citations = Citations(code_map=build(workspace), through_workers=True)
    call = ToolCall(id="d", name="delegate", arguments="{}")
    batch = ToolResult(output="2 workers", parts=(failed, read_it), is_error=True)
    citations.note(PendingCall(call, {}, ("delegate", "{}")), batch)
    assert citations.unsupported("ConsoleRenderer is defined in dev.py.") == []
    assert citations.unsupported("Its tests are in nowhere.py.") == [
        "it names nowhere.py, which no worker's report shows"
    ]


def test_a_reader_resumed_after_calls_of_its_own_is_not_asked_for_another(
    workspace: Path,
) -> None:
    package(workspace)
    recorder = Recorder()
    model = ScriptedModel([say("`BoundLogger` is in stdlib.py.")])
    agent = make_agent(workspace, model, recorder, look_first=True, calls_first=True)
    messages: list[Message] = [
        *shown_stdlib()[:2],
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "stdlib.py"}'}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": LOGGERS},
        {"role": "user", "content": "Go on."},
    ]  # fmt: skip
    assert run_agent(agent, messages).outcome == Finished("`BoundLogger` is in stdlib.py.")
    assert model.required == [False]


def test_a_listing_shows_its_own_folder_s_files_not_every_file_of_that_name(
    workspace: Path,
) -> None:
    """list_dir of pkg/ shows pkg/loop.py: an answer naming other/loop.py (which is not
    there) is not borne out by it, and what is still unsupported says it is not there."""
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "loop.py").write_text("def run():\n    pass\n")
    claim = "The loop is in other/loop.py."
    script = [call("list_dir", path="pkg"), say(claim), say(claim)]
    outcome, _, _ = run_reader(workspace, script, sends=1)
    assert "it names other/loop.py, which none of your calls opened" in outcome.answer
    assert "pkg/loop.py" not in outcome.answer


def test_a_path_a_docstring_mentions_is_no_file_the_search_found(workspace: Path) -> None:
    """find_symbol by words shows what each definition's docstring says; a path in
    those words ("keys live in conf/secrets.yaml") is not one the search matched, and an
    answer naming it still goes back."""
    (workspace / "keys.py").write_text(
        'def load_keys():\n    """Read the keys; they live in conf/secrets.yaml."""\n'
    )
    claim = "The keys are read in keys.py, from conf/secrets.yaml."
    script = [call("find_symbol", name="read the keys"), say(claim), say(claim)]
    outcome, model, _ = run_reader(workspace, script, sends=1)
    assert "keys.py:1 function load_keys — Read the keys" in str(model.seen[1])
    assert "it names conf/secrets.yaml, which none of your calls opened" in outcome.answer
    assert "it names keys.py" not in outcome.answer


def test_a_reader_with_no_time_for_another_reply_is_not_sent_back(workspace: Path) -> None:
    """The demo's explorer answered with 79 s left, naming files that are not there; sent
    back, it had 4 s for its next reply, and ended out of time. With no time for another
    reply nothing goes back: the answer goes on, its unsupported claims marked."""
    package(workspace)
    recorder = Recorder()
    answer = "1. BoundLogger: stdlib.py\n2. ConsoleRenderer: renderers.py"

    def answered_at_the_deadline(_: list[Message]) -> object:
        agent.budget.no_time_for_another_step = lambda *_: True  # type: ignore[method-assign]
        return say(answer)

    model = ScriptedModel(
        [call("read_file", path="stdlib.py"), answered_at_the_deadline]  # type: ignore[list-item]
    )
    gate = reader_gate(workspace, recorder)
    agent = make_agent(workspace, model, recorder, gate=gate, look_first=True, calls_first=True)
    result = run_agent(agent, shown_stdlib())
    outcome = result.outcome
    assert isinstance(outcome, Finished), outcome
    assert outcome.answer.startswith(answer + "\n\n" + UNSUPPORTED)
    assert "renderers.py" in outcome.answer.split(UNSUPPORTED)[1]
    assert [v["action"] for v in recorder.of("verification")] == ["accepted"]


def test_an_empty_answer_goes_back_however_little_time_is_left(workspace: Path) -> None:
    """The demo's explorer, its tools paused at the deadline, replied with nothing; let
    through, the run said it was done with no answer. An empty answer has nothing to
    lose, so it goes back whatever the time left."""
    package(workspace)
    recorder = Recorder()

    def empty_at_the_deadline(_: list[Message]) -> object:
        agent.budget.no_time_for_another_step = lambda *_: True  # type: ignore[method-assign]
        return say("")

    answer = "BoundLogger is in stdlib.py."
    model = ScriptedModel(
        [call("read_file", path="stdlib.py"), empty_at_the_deadline, say(answer)]  # type: ignore[list-item]
    )
    gate = reader_gate(workspace, recorder)
    agent = make_agent(workspace, model, recorder, gate=gate, look_first=True, calls_first=True)
    outcome = run_agent(agent, shown_stdlib()).outcome
    assert isinstance(outcome, Finished) and outcome.answer == answer
    assert next(v["reason"] for v in recorder.of("verification")) == "the answer was empty"


def test_a_folder_holding_a_file_the_map_shows_is_known(workspace: Path) -> None:
    """The demo's explorer named the top-level folders; the map showed files in each, and
    the answer lost them as unsupported."""
    (workspace / "workers").mkdir()
    (workspace / "workers" / "loop.py").write_text("def run():\n    pass\n")
    citations = Citations(code_map=build(workspace), shown=frozenset({"workers/loop.py"}))
    assert citations.unsupported("`workers/` holds the agents; the loop is workers/loop.py.") == []
    claims = citations.unsupported("`supervisor/` holds the rest.")
    assert claims and "supervisor/" in claims[0]
    assert Citations(shown=frozenset({"workersx/a.py"})).unsupported("`workers/` is it.")


def test_the_files_an_answer_names_that_no_call_looked_inside_are_said_apart() -> None:
    """Opened, a grep's match in it, or where find_symbol found a name defined: looked
    inside. Listed, found by its name, by words, named in a hint, an error, a matched
    line's text or a list of users: not. A folder is no file, and one that looks
    through workers has none."""

    def noted(tool: str, output: str, is_error: bool = False, **args: str) -> Citations:
        citations = Citations(shown=frozenset({"a.py", "b.py", "c.py", "d.py", "e.py"}))
        pending = PendingCall(ToolCall("1", tool, "{}"), args, (tool, "{}"))
        citations.note(pending, ToolResult(output, is_error=is_error))
        return citations

    answer = "1. a.py\n2. b.py\n3. pkg/c.py\n4. d.py in pkg/"
    assert noted("read_file", "x", path="a.py").not_looked_into(answer) == (
        "b.py",
        "pkg/c.py",
        "d.py",
    )
    matched = noted("grep", "b.py:3: see c.py\n/workspace/d.py:9:x", pattern="x")
    assert matched.not_looked_into("b.py, c.py, d.py") == ("c.py",)
    overview = "40 matches in 2 files; matches per file, most first:\n  b.py: 30\n  c.py: 10"
    assert noted("grep", overview, pattern="x").not_looked_into("b.py, c.py") == ()
    hinted = "no matches for 'cache'\nFiles and folders whose names hold 'cache': b.py"
    assert noted("grep", hinted, pattern="cache").not_looked_into("b.py") == ("b.py",)
    told = "no such file or folder: 'core'; did you mean 'b.py'?"
    assert noted("grep", told, True, pattern="x", path="core").not_looked_into("b.py") == ("b.py",)
    defined = "run is defined in:\n  c.py:1 function run\nUsed in 1 file, most first: d.py (2)"
    assert noted("find_symbol", defined, name="run").not_looked_into("c.py, d.py") == ("d.py",)
    by_words = "Definitions with the words 'run it' …, best first:\n  c.py:1 function run"
    assert noted("find_symbol", by_words, name="run it").not_looked_into("c.py") == ("c.py",)
    assert noted("list_dir", "a.py\nb.py", path=".").not_looked_into("a.py") == ("a.py",)
    assert noted("find_files", "e.py", pattern="e").not_looked_into("e.py") == ("e.py",)
    workers = Citations(through_workers=True)
    assert workers.not_looked_into("a.py") == ()


def test_a_made_up_path_under_a_workspace_folder_is_unsupported(workspace: Path) -> None:
    """The demo's explorer listed `supervisor/delegation` (there is supervisor/delegation.py)
    among the folders: a path with no suffix counts where its first part is a folder of
    the workspace, and "and/or" or `application/json` stay prose."""
    (workspace / "supervisor" / "repo_map").mkdir(parents=True)
    (workspace / "supervisor" / "delegation.py").write_text("def delegate():\n    pass\n")
    (workspace / "supervisor" / "repo_map" / "index.py").write_text("def build():\n    pass\n")
    code_map = build(workspace)
    citations = Citations(code_map=code_map, shown=frozenset(code_map.files))
    [claim] = citations.unsupported(
        "- `supervisor/repo_map`: the map.\n- `supervisor/delegation`: delegation, and/or "
        "application/json replies."
    )
    assert claim == (
        "it names supervisor/delegation, which none of your calls opened, listed or matched"
        " (there is supervisor/delegation.py)"
    )
    assert citations.unsupported("supervisor/delegation.py delegates; see supervisor/.") == []
    assert citations.unsupported("A supervisor/worker design.") == [], "prose, not a path"
    # A file with no suffix that a call found is known by that path.
    (workspace / "supervisor" / "Dockerfile").write_text("FROM scratch\n")
    pending = PendingCall(ToolCall("1", "find_files", "{}"), {"pattern": "Dock*"}, ("f", "{}"))
    citations.note(pending, ToolResult("supervisor/Dockerfile"))
    assert citations.unsupported("`supervisor/Dockerfile` builds it.") == []
