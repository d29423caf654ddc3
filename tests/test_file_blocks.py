"""Files written as fenced blocks in a reply: which file a block is for, how a Python
block that holds only some functions is merged, and the loop running them as writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.test_loop import make_agent, tool_messages
from workers.editing import EditGuard
from workers.events import Recorder
from workers.file_blocks import calls_from_blocks
from workers.loop import run_agent
from workers.model import Message
from workers.model.scripted import ScriptedModel, call, say

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
'''


def writes(text: str, guard: EditGuard) -> dict[str, str]:
    calls = calls_from_blocks(text, guard, "b")
    assert all(c.name == "write_file" for c in calls)
    return {json.loads(c.arguments)["path"]: json.loads(c.arguments)["content"] for c in calls}


def read(guard: EditGuard, *paths: str) -> EditGuard:
    for path in paths:
        guard.after("read_file", {"path": path}, _ok())
    return guard


def _ok() -> object:
    from workers.tools.base import ToolResult

    return ToolResult(output="")


def test_a_block_under_a_path_line_is_that_file_s_new_content(workspace: Path) -> None:
    guard = EditGuard(workspace)
    (workspace / "notes.md").write_text("old\n")
    for label in ("notes.md", "`notes.md`:", "**notes.md**", "# notes.md", "File: notes.md"):
        text = f"Here it is.\n\n{label}\n```markdown\nnew\n```\nDone."
        assert writes(text, guard) == {"notes.md": "new\n"}, label
    assert writes("```markdown notes.md\nnew\n```", guard) == {"notes.md": "new\n"}
    assert writes("```python:/workspace/x.py\nx = 1\n```", EditGuard(workspace, "/workspace")) == {
        "x.py": "x = 1\n"
    }


def test_blocks_that_are_not_a_file_s_content_are_left_as_prose(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    guard = read(EditGuard(workspace), "calc.py")
    assert writes("Run it:\n```bash\npython3 -m pytest -q\n```", guard) == {}
    assert writes("Then I will edit calc.py like this:\n```python\nprint(1)\n```", guard) == {}
    cut = "calc.py\n```python\ndef add(a, b):\n    return a +"  # the reply ran out here
    assert writes(cut, guard) == {}, "a block that never closes is never written"
    same = "calc.py\n```python\ndef add(a, b):\n    return a - b\n```"
    assert writes(same, guard) == {}, "a block that changes nothing is no write"
    assert writes("calc.py\n```python\ndef add(a, b) return\n```", guard) == {}, "not Python"


def test_an_unlabelled_python_block_goes_to_the_one_read_file_that_defines_it(
    workspace: Path,
) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    raise NotImplementedError\n")
    (workspace / "test_calc.py").write_text("from calc import add\n\ndef add():\n    pass\n")
    (workspace / "other.py").write_text("def add(a, b):\n    return 0\n")
    block = "I implemented it:\n```python\ndef add(a, b):\n    return a + b\n```"
    assert writes(block, EditGuard(workspace)) == {}, "nothing read: nowhere to put it"
    guard = read(EditGuard(workspace), "calc.py", "test_calc.py")
    assert writes(block, guard) == {"calc.py": "def add(a, b):\n    return a + b\n"}
    read(guard, "other.py")
    assert writes(block, guard) == {}, "two files define it: the block is left as prose"


def test_a_python_block_with_some_functions_replaces_those_and_keeps_the_rest(
    workspace: Path,
) -> None:
    (workspace / "stats.py").write_text(STATS)
    guard = read(EditGuard(workspace), "stats.py")
    block = (
        "```python\nfrom statistics import fmean\n\n@staticmethod\ndef median(values):\n"
        "    ordered = sorted(values)\n    middle = len(ordered) // 2\n"
        "    return ordered[middle]\n\n\nLIMIT = 3\n```"
    )
    merged = writes(block, guard)["stats.py"]
    assert merged == (
        '"""Small statistics."""\n\nimport math\nfrom statistics import fmean\n\n\n'
        "def mean(values):\n    return sum(values) / len(values)\n\n\n"
        "@staticmethod\ndef median(values):\n    ordered = sorted(values)\n"
        "    middle = len(ordered) // 2\n    return ordered[middle]\n\n\n"
        "def spread(values):\n    return max(values) - min(values)\n\n\nLIMIT = 3\n"
    )


def test_a_block_that_defines_everything_is_the_whole_file(workspace: Path) -> None:
    (workspace / "calc.py").write_text("import os\n\ndef add(a, b):\n    return 0\n")
    guard = read(EditGuard(workspace), "calc.py")
    block = "calc.py\n```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```"
    assert writes(block, guard) == {
        "calc.py": "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
    }


def test_the_loop_runs_blocks_as_writes_and_offers_no_edit_tools(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    model = ScriptedModel(
        [
            say("calc.py\n```python\ndef add(a, b):\n    return a + b\n```"),  # not read yet
            call("read_file", path="calc.py"),
            say("The fix:\n\ncalc.py\n```python\ndef add(a, b):\n    return a + b\n```"),
            say("Done: add adds."),
        ]
    )
    recorder = Recorder()
    messages: list[Message] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    agent = make_agent(workspace, model, recorder, edits=EditGuard(workspace), file_blocks=True)
    result = run_agent(agent, messages)

    told = [m["content"] for m in result.messages if m["role"] == "user"][1:]
    assert told[0].startswith("refused: read calc.py before changing it")
    assert told[1] == "wrote 32 bytes to calc.py (replaced the existing file)"
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert result.outcome.answer == "Done: add adds."  # type: ignore[union-attr]
    assert [m["role"] for m in result.messages[2:]] == [
        "assistant",  # the reply with its block, as the model wrote it: no tool_calls
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert "tool_calls" not in result.messages[2]
    offered = {tool["function"]["name"] for tool in model.tools_seen[0]}
    assert "read_file" in offered and not offered & {"write_file", "edit_file"}
    writes = [r for r in recorder.records if r["event"] == "tool_call" and r.get("from_block")]
    assert [(w["name"], w["args"]["path"], w["is_error"]) for w in writes] == [
        ("write_file", "calc.py", True),
        ("write_file", "calc.py", False),
    ]
    sources = [r["source"] for r in recorder.records if r["event"] == "user_message"]
    assert sources == ["file_blocks", "file_blocks"]


def test_a_block_is_written_before_the_calls_of_the_same_reply(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    reply = say("calc.py\n```python\ndef add(a, b):\n    return a + b\n```")
    reply = dataclasses.replace(
        reply, tool_calls=call("run_shell", command="grep -c 'a + b' calc.py").tool_calls
    )
    model = ScriptedModel([call("read_file", path="calc.py"), reply, say("done")])
    recorder = Recorder()
    messages: list[Message] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    agent = make_agent(workspace, model, recorder, edits=EditGuard(workspace), file_blocks=True)
    result = run_agent(agent, messages)
    assert tool_messages(result)[1]["content"].startswith("1\n"), "grep ran after the write"
    assert result.messages[-2] == {
        "role": "user",
        "content": "wrote 32 bytes to calc.py (replaced the existing file)",
    }


def test_a_reply_that_only_echoes_a_file_is_told_so_once(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    echo = say("calc.py\n```python\ndef add(a, b):\n    return a + b\n```")
    model = ScriptedModel([call("read_file", path="calc.py"), echo, echo])
    messages: list[Message] = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    agent = make_agent(workspace, model, Recorder(), edits=EditGuard(workspace), file_blocks=True)
    result = run_agent(agent, messages)
    assert model.seen[2][-1]["content"] == (
        "Nothing was written: your blocks match the files as they are (calc.py). Next, run "
        "the tests with run_shell, or give your final answer in plain sentences."
    )
    assert result.outcome.answer.startswith("calc.py\n```python")  # type: ignore[union-attr]
