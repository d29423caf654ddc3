"""Files written as fenced blocks in a reply: which file a block is for, how a Python
block that holds only some functions is merged, and the loop running them as writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.helpers import make_agent, tool_messages
from workers.agent import Agent
from workers.aids.file_blocks import calls_from_blocks, read_blocks
from workers.guards.editing import EditGuard
from workers.log.events import Recorder
from workers.loop import run_agent
from workers.model import Message
from workers.model.scripted import ScriptedModel, call, say
from workers.tools.base import ToolResult


def blocks_agent(workspace: Path, model: ScriptedModel, recorder: Recorder | None = None) -> Agent:
    return make_agent(
        workspace, model, recorder or Recorder(), edits=EditGuard(workspace), file_blocks=True
    )


def messages() -> list[Message]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]


def writes(text: str, guard: EditGuard) -> dict[str, str]:
    calls = calls_from_blocks(text, guard, "b")
    assert all(c.name == "write_file" for c in calls)
    return {json.loads(c.arguments)["path"]: json.loads(c.arguments)["content"] for c in calls}


def read(guard: EditGuard, *paths: str) -> EditGuard:
    for path in paths:
        guard.after("read_file", {"path": path}, ToolResult(output=""))
    return guard


def test_a_block_under_a_path_line_is_that_file_s_new_content(workspace: Path) -> None:
    guard = EditGuard(workspace)
    (workspace / "notes.md").write_text("old\n")
    for label in ("notes.md", "`notes.md`:", "**notes.md**", "# notes.md", "File: notes.md"):
        text = f"Here it is.\n\n{label}\n```markdown\nnew\n```\nDone."
        assert writes(text, guard) == {"notes.md": "new\n"}, label
    assert writes("```markdown notes.md\nnew\n```", guard) == {"notes.md": "new\n"}
    in_container = EditGuard(workspace, "/workspace")
    assert writes("```python:/workspace/x.py\nx = 1\n```", in_container) == {"x.py": "x = 1\n"}
    assert writes("/workspace/y.py\n```python\ny = 1\n```", in_container) == {"y.py": "y = 1\n"}


def test_fences_as_markdown_has_them(workspace: Path) -> None:
    guard = EditGuard(workspace)
    assert writes("a.txt\n~~~\ntilde\n~~~", guard) == {"a.txt": "tilde\n"}
    assert writes("1. Change it:\n   b.txt\n   ```\n   indented\n   ```", guard) == {
        "b.txt": "indented\n"
    }
    assert writes("c.txt\r\n```\r\ncrlf\r\n```\r\n", guard) == {"c.txt": "crlf\n"}
    nested = "README.md\n````markdown\n# Use\n```bash\nmake\n```\n````"
    assert writes(nested, guard) == {"README.md": "# Use\n```bash\nmake\n```\n"}


def test_a_block_left_open_ends_where_the_next_file_s_block_opens(workspace: Path) -> None:
    """The held-out samples: the code file's fence never closed, then the test file under
    its path line. Each is its own file; a fence with no language inside a block is still
    the block's content, and a longer outer fence still holds a shorter inner one."""
    guard = EditGuard(workspace)
    reply = (
        "calc.py\n```python\ndef add(a, b):\n    return a + b\n\n\n"
        "test_calc.py\n```python\ndef test_add():\n    assert add(1, 2) == 3\n```"
    )
    assert writes(reply, guard) == {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": "def test_add():\n    assert add(1, 2) == 3\n",
    }
    unlabelled = "calc.py\n```python\nx = 1\n```python\ny = 2\n```"
    assert writes(unlabelled, guard) == {"calc.py": "x = 1\n"}, "the second has no path"
    nested = "README.md\n````markdown\n# Use\n```python\nmake()\n```\n````"
    assert writes(nested, guard) == {"README.md": "# Use\n```python\nmake()\n```\n"}
    example = "README.md\n```markdown\n# Use\n**app.py**\n```python\nprint(1)\n```\n```"
    assert "app.py" not in writes(example, guard), "a Markdown block's example is no file"
    named = "calc.py\n```python\nimport unittest\nunittest.main()\n```python util.py\nx = 1\n```"
    assert writes(named, guard) == {
        "calc.py": "import unittest\nunittest.main()\n",
        "util.py": "x = 1\n",
    }, "a path in the fence: the line above it is code"


def test_blocks_that_are_not_a_file_s_content_are_left_as_prose(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "notes.md").write_text("# Notes\n")
    guard = read(EditGuard(workspace), "calc.py", "notes.md")
    assert writes("Run it:\n```bash\npython3 -m pytest -q\n```", guard) == {}
    assert writes("Then I will edit calc.py like this:\n```python\nprint(1)\n```", guard) == {}
    assert writes("notes.md\n```diff\n-# Notes\n+# Todo\n```", guard) == {}, "a diff"
    assert writes("calc.py\n```bash\nls\n```", guard) == {}, "a shell block is not Python"
    assert writes("calc.py\n```python\ndef add(a, b):\n    return a - b\n```", guard) == {}, (
        "a block that changes nothing is no write"
    )
    example = "For example:\n```python\nresult = add(2, 3)\n```"
    assert writes(example, guard) == {}, "an example names no definition of a read file"


def test_blocks_that_cannot_be_written_are_told_never_dropped(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "latin.py").write_bytes(b"# caf\xe9\nx = 1\n")
    guard = read(EditGuard(workspace), "calc.py", "latin.py")
    cut_text = "calc.py\n```python\ndef add(a, b):\n    return a +"
    cut = read_blocks(cut_text, guard, "b", cut=True)
    assert cut.calls == [] and "cut off inside it" in cut.problems[0]
    ended = read_blocks("calc.py\n```python\ndef add(a, b):\n    return a + b\n", guard, "b")
    assert len(ended.calls) == 1, "a reply that ends (not cut) closes its last block"
    broken = read_blocks("calc.py\n```python\ndef add(a, b) return\n```", guard, "b")
    assert (
        "the block for calc.py was not written: the block is not valid Python"
        in (broken.problems[0])
    )
    latin = read_blocks("latin.py\n```python\nx = 2\n```", guard, "b")
    assert latin.problems == ["the block for latin.py was not written: latin.py is not UTF-8 text"]


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


def test_a_bare_name_is_the_one_read_file_of_that_name(workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "stats.py").write_text("def mean(v):\n    return 0\n")
    guard = read(EditGuard(workspace), "pkg/stats.py")
    block = "stats.py\n```python\ndef mean(v):\n    return sum(v) / len(v)\n```"
    assert list(writes(block, guard)) == ["pkg/stats.py"]


def test_blocks_for_one_file_in_one_reply_all_count(workspace: Path) -> None:
    (workspace / "calc.py").write_text(
        "def add(a, b):\n    return 0\n\n\ndef sub(a, b):\n    return 0\n"
    )
    guard = read(EditGuard(workspace), "calc.py")
    text = (
        "calc.py\n```python\ndef add(a, b):\n    return a + b\n```\n"
        "and\n\n./calc.py\n```python\ndef sub(a, b):\n    return a - b\n```"
    )
    assert writes(text, guard) == {
        "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    }


def test_a_file_s_line_endings_are_kept(workspace: Path) -> None:
    (workspace / "calc.py").write_bytes(b"import os\r\n\r\ndef add(a, b):\r\n    return 0\r\n")
    guard = read(EditGuard(workspace), "calc.py")
    block = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
    assert writes(block, guard) == {
        "calc.py": "import os\r\n\r\ndef add(a, b):\r\n    return a + b\r\n"
    }
    echo = "calc.py\n```python\nimport os\n\ndef add(a, b):\n    return 0\n```"
    assert read_blocks(echo, guard, "b").unchanged == ["calc.py"]


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
    result = run_agent(blocks_agent(workspace, model, recorder), messages())

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
    result = run_agent(blocks_agent(workspace, model, recorder), messages())
    assert tool_messages(result)[1]["content"].startswith("1\n"), "grep ran after the write"
    assert result.messages[-2] == {
        "role": "user",
        "content": "wrote 32 bytes to calc.py (replaced the existing file)",
    }


def test_a_reply_that_only_echoes_a_file_is_told_so_once(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    echo = say("calc.py\n```python\ndef add(a, b):\n    return a + b\n```")
    model = ScriptedModel([call("read_file", path="calc.py"), echo, echo])
    result = run_agent(blocks_agent(workspace, model), messages())
    assert model.seen[2][-1]["content"] == (
        "Nothing was written: your blocks match the files as they are (calc.py). Next, run "
        "the tests with run_shell, or give your final answer in plain sentences."
    )
    assert result.outcome.answer.startswith("calc.py\n```python")  # type: ignore[union-attr]


def test_a_test_run_after_a_block_is_not_the_same_call_again(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    grep = call("run_shell", command="grep -c 'a' calc.py")
    fix = say("calc.py\n```python\ndef add(a, b):\n    return a + b\n```")
    fix = dataclasses.replace(fix, tool_calls=grep.tool_calls)
    model = ScriptedModel([call("read_file", path="calc.py"), grep, fix, say("done")])
    result = run_agent(blocks_agent(workspace, model), messages())
    ran = [m["content"] for m in tool_messages(result)][1:]
    assert len(ran) == 2 and all(r.startswith("2\n[exit code 0") for r in ran), "both ran"


def test_a_block_writer_going_round_is_paused_and_may_still_write(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    read_it = call("read_file", path="calc.py")
    fix = say("From what I found: calc.py\n```python\ndef add(a, b):\n    return a + b\n```")
    model = ScriptedModel([read_it, read_it, read_it, fix, say("done")])
    result = run_agent(blocks_agent(workspace, model), messages())
    assert model.paused == [False, False, False, True, False]
    assert model.seen[3][-1]["content"].startswith("Tools are paused for this reply. If you know")
    assert (workspace / "calc.py").read_text().endswith("a + b\n"), "written while paused"
    assert result.messages[-2]["content"].startswith("wrote")
