"""Tool calls written as text and read by gaffer (`calls_as_text`), for a server whose
parser refuses a whole reply over one badly written call: the bundled model's several
calls in one fenced block, one a line, came back from llama.cpp as an error."""

from __future__ import annotations

import json

import pytest

from tests.fake_openai import FakeOpenAI, Reply, prefilled_model
from workers.model import AssistantTurn, CallOptions, ModelError
from workers.model.text_calls import HeldBack, as_text, described, read_calls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Workspace-relative path."},
                    "offset": {"type": "integer"},
                },
                "required": ["path"],
            },
        },
    }
]


def read(text: str, opening: str = "") -> AssistantTurn:
    return read_calls(AssistantTurn(text=text), opening)


def calls(turn: AssistantTurn) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, json.loads(c.arguments)) for c in turn.tool_calls]


def test_the_forms_a_small_model_writes_its_calls_in_are_read() -> None:
    one_a_line = (
        "Let me look.\n```json\n"
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        '{"name": "grep", "arguments": {"pattern": "x"}}\n```'
    )
    turn = read(one_a_line)
    assert calls(turn) == [("read_file", {"path": "a.py"}), ("grep", {"pattern": "x"})]
    assert turn.text == "Let me look." and turn.finish_reason == "tool_calls"
    assert len({c.id for c in turn.tool_calls}) == 2, "each call its own id"
    blocks = (
        '```json\n{"name": "a", "arguments": {}}\n```\n'
        '```json\n[{"name": "b", "parameters": {}}]\n```'
    )
    assert [name for name, _ in calls(read(blocks))] == ["a", "b"]
    tagged = '<tool_call>\n{"name": "grep", "arguments": "{\\"pattern\\": \\"y\\"}"}\n</tool_call>'
    assert calls(read(tagged)) == [("grep", {"pattern": "y"})]
    assert calls(read('{"name": "list_dir", "arguments": {"path": "."}}')) == [
        ("list_dir", {"path": "."})
    ]
    # A call named after a file still goes to the executor, which says it is no tool.
    assert calls(read('```json\n{"name": "stop.py", "arguments": {"path": "stop.py"}}\n```'))
    # The opening the reply was begun with, which the server leaves out, is put back.
    opened = read('"tasks": ["a"]}}\n```', opening='```json\n{"name": "delegate", "arguments": {')
    assert calls(opened) == [("delegate", {"tasks": ["a"]})]


def test_an_answer_with_code_in_it_is_no_call_and_a_broken_call_is_unreadable() -> None:
    answer = 'The config is:\n```json\n{"debug": true}\n```\nand `name` is unset.'
    assert read(answer).tool_calls == () and read(answer).text == answer
    package = 'package.json\n```json\n{"name": "app", "version": "1.0.0"}\n```'
    assert read(package).tool_calls == (), "a file block with a name is no call"
    thought = '```json\n{"name": "grep", "arguments": {}, "thought": "look"}\n```'
    assert calls(read(thought)) == [("grep", {})], "a key besides is left out, not the call"
    with pytest.raises(ModelError) as raised:
        read('```json\n{"name": "grep", "arguments": {"pattern": \n```')
    assert raised.value.kind == "malformed_output"
    # Markdown inside an argument: its fences are the string's, not the block's end.
    markdown = (
        '```json\n{"name": "write_file", "arguments": {"path": "README.md", '
        '"content": "Run:\\n```sh\\nmake\\n```"}}\n```'
    )
    assert calls(read(markdown)) == [
        ("write_file", {"path": "README.md", "content": "Run:\n```sh\nmake\n```"})
    ]
    # Other openings: a tagged fence, a bare call after a line of words.
    assert calls(read('```tool_call\n{"name": "a", "arguments": {}}\n```')) == [("a", {})]
    bare = read('I will read it.\n{"name": "read_file", "arguments": {"path": "a.py"}}')
    assert calls(bare) == [("read_file", {"path": "a.py"})] and bare.text == "I will read it."
    # A broken call between two whole ones: both whole ones run.
    between = '```json\n{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {\n{"name": "c", "arguments": {}}\n```'
    assert [name for name, _ in calls(read(between))] == ["a", "c"]
    # What else the reply carried stays with it.
    assert read('```json\n{"name": "a", "arguments": {}}\n```').runaway == ""
    # A whole call before one cut at the output cap: the whole one runs.
    cut = '```json\n{"name": "a", "arguments": {}}\n{"name": "b", "argu'
    assert [name for name, _ in calls(read(cut))] == ["a"]


def test_the_conversation_goes_as_text_with_the_tools_in_the_system_message() -> None:
    messages = [
        {"role": "system", "content": "You read code."},
        {"role": "user", "content": "Where is X?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "grep", "arguments": "{}"}},
                {"id": "2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "a.py:1:X"},
        {"role": "tool", "tool_call_id": "2", "content": "a.py"},
    ]
    system, user, assistant, results = as_text(messages, TOOLS)
    assert system["content"].startswith("You read code.\n\n# Tools")
    assert (
        "- read_file(path, offset?): Read a file.\n    path: Workspace-relative path."
        in (system["content"])
    )
    assert user == messages[1]
    assert assistant == {
        "role": "assistant",
        "content": '```json\n{"name": "grep", "arguments": {}}\n```\n'
        '```json\n{"name": "ls", "arguments": {}}\n```',
    }
    assert results == {
        "role": "user",
        "content": "<tool_response>\na.py:1:X\n</tool_response>\n"
        "<tool_response>\na.py\n</tool_response>",
    }
    assert messages[0]["content"] == "You read code.", "the caller's messages are untouched"
    quoted = {"id": "3", "type": "function", "function": {"name": 'a"b', "arguments": "{}"}}
    [_, said] = as_text([{"role": "assistant", "content": None, "tool_calls": [quoted]}], TOOLS)
    assert calls(read(said["content"])) == [('a"b', {})], "a name with a quote stays JSON"
    assert as_text(messages[1:2], TOOLS)[0]["content"].endswith(described(TOOLS))


def test_streamed_text_stops_where_a_call_begins_and_an_answer_is_shown_whole() -> None:
    shown: list[str] = []
    held = HeldBack(shown.append)
    for piece in ["Let me", " look.\n`", "``json\n{", '"name": ...']:
        held.feed(piece)
    assert "".join(shown) == "Let me look.\n"
    shown.clear()
    held = HeldBack(shown.append)
    for piece in ["It is ", "in `a.py`", " and {", "x}."]:
        held.feed(piece)
    held.rest()
    assert "".join(shown) == "It is in `a.py` and {x}."
    # A retry that answers where the first try called: no JSON of the first try shows.
    shown.clear()
    held = HeldBack(shown.append)
    held.feed("Reading. ")
    held.feed('```json\n{"name": "read_fi')
    held.restart()
    held.feed("The answer is 42.")
    held.rest()
    assert "```" not in "".join(shown) and "".join(shown).endswith("The answer is 42.")
    # A reply begun with a call's opening (left out by the server) is held whole.
    shown.clear()
    held = HeldBack(shown.append, in_call=True)
    held.feed('"path": "b.py"}}\n```')
    assert shown == []


def test_a_server_sent_no_tools_gets_them_in_the_prompt_and_its_text_calls_run() -> None:
    """Against a real local server: no `tools` in the request, the calls read from the
    reply's text, and the user sees the words before them, not the JSON."""
    written = 'Looking.\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```'
    replies = [Reply(text=written), Reply(text='"path": "b.py"}}\n```'), Reply(text="Done.")]
    with FakeOpenAI(replies) as server:
        model = prefilled_model(server, answer_prefill="From what I found:\n", calls_as_text=True)
        shown: list[str] = []
        asked = [{"role": "user", "content": "Read a.py"}]
        turn = model.complete(asked, TOOLS, CallOptions(on_text=shown.append))
        required = model.complete(asked, TOOLS, CallOptions(require_tool=True))
        answer = model.complete(asked, TOOLS, CallOptions(tools_off=True))
    assert calls(turn) == [("read_file", {"path": "a.py"})] and "".join(shown) == "Looking.\n"
    assert calls(required) == [("read_file", {"path": "b.py"})]
    assert answer.text == "From what I found:\nDone." and answer.tool_calls == ()
    first, second, third = server.requests
    assert all("tools" not in r and "tool_choice" not in r for r in server.requests)
    assert "# Tools" in first["messages"][0]["content"]
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": '```json\n{"name": "read_file", "arguments": {',
    }
    assert third["messages"][-1] == {"role": "assistant", "content": "From what I found:\n"}
