"""Finding definitions by the words of a question: what a docstring says a definition is,
the search over names, docstrings and paths, the map's room for each question, and
find_symbol given words instead of a name."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from workers import state
from workers.guards.citations import found_nothing
from workers.repo_map import index
from workers.repo_map.index import build
from workers.repo_map.ranking import rendered
from workers.repo_map.search import Search
from workers.repo_map.symbols import SUMMARY_CHARS, symbols_of
from workers.repo_map.tool import FindSymbolArgs, find_symbol_tool
from workers.repo_map.words import stem
from workers.tools.base import ToolContext, ToolError

LATEX = '''"""Formatters."""


class LatexFormatter:
    """Format tokens as LaTeX code.

    More about it here.
    """

    def format(self, tokens):
        """Write the tokens."""


def escape_tex(text):
    """Escape the characters TeX treats as commands."""
'''


def test_a_docstring_gives_its_first_sentence_of_prose_on_one_line() -> None:
    source = (
        'class Model:\n    """!!! abstract "Usage Documentation"\n        [Models](../m.md)\n\n'
        "    Usage docs: https://docs.example/models\n\n"
        '    A base class\n    for models.  Attributes follow.\n    """\n\n'
        'def shout(x):\n    """Say \x1b[31mit\x07 \u202eloud\u200b `now`\\ud800."""\n\n'
        f'def long():\n    """{"word " * 60}"""\n\n'
        "def bare():\n    pass\n"
    )
    said = {s.name: s.summary for s in symbols_of("m.py", source.encode()).definitions}
    assert said["Model"] == "A base class for models."
    assert said["shout"] == "Say [31mit loud now .", "no hidden character, no backtick"
    assert len(said["long"]) == SUMMARY_CHARS and said["long"].endswith("…")
    assert said["bare"] == ""


def test_a_question_in_prose_finds_the_definition_its_docstring_describes(
    workspace: Path,
) -> None:
    (workspace / "formatters").mkdir()
    (workspace / "formatters" / "latex.py").write_text(LATEX)
    (workspace / "formatters" / "html.py").write_text(
        'class HtmlFormatter:\n    """Format tokens as HTML 4 <span> tags."""\n'
    )
    (workspace / "lexer.py").write_text(
        'class RegexLexer:\n    """Base for simple stateful regular expression-based lexers."""\n'
    )
    search = Search(build(workspace))
    best = search.best("Which file defines the formatter that writes LaTeX?", 3)
    assert [(f.path, f.symbol.name) for f in best][:2] == [
        ("formatters/latex.py", "LatexFormatter"),
        ("formatters/html.py", "HtmlFormatter"),
    ]
    assert len({f.path for f in best}) == len(best), "one line per file"
    found = search.best("the base class of lexers built from regular expressions", 1)
    assert [f.path for f in found] == ["lexer.py"]
    assert search.best("Which file is it?", 3) == [], "no word of it names anything"


def test_a_question_s_words_meet_a_name_s_in_any_of_their_forms(workspace: Path) -> None:
    """ "validates" and `validator`, "decorator" and "Decorate": one word to the search
    (Snowball's English stemmer), where a plural-and-verb-ending cut kept them apart."""
    (workspace / "functional.py").write_text(
        'def field_validator(name):\n    """Decorate methods on the class to validate fields."""\n'
    )
    (workspace / "schema.py").write_text(
        'def fields_of(model):\n    """The fields of one model, each with its type."""\n'
    )
    search = Search(build(workspace))
    best = search.best("Which file defines the decorator that validates one field?", 2)
    assert (best[0].path, best[0].symbol.name) == ("functional.py", "field_validator")
    assert stem("validation") == stem("validator") == stem("validates") == "valid"


def test_each_question_is_shown_its_best_files_with_what_they_say_they_are(
    workspace: Path,
) -> None:
    (workspace / "formatters").mkdir()
    (workspace / "formatters" / "latex.py").write_text(LATEX)
    for n in range(40):  # files that rank high for the rest of the task, and fill the room
        (workspace / f"progress_{n:02}.py").write_text(
            "".join(f"def progress_step_{k}():\n    pass\n" for k in range(8))
        )
    task = (
        "Answer each question.\n1. Which file shows the progress?\n"
        "2. Which file defines the formatter that writes LaTeX?"
    )
    shown = rendered(build(workspace), task, max_chars=1500)
    assert len(shown) <= 1500
    assert "`formatters/latex.py`\n  4: class LatexFormatter — Format tokens as LaTeX code." in (
        shown
    )
    assert "progress_step" in shown, "the rest of the room still goes by rank"


def test_find_symbol_given_words_lists_the_definitions_that_have_them(workspace: Path) -> None:
    (workspace / "latex.py").write_text(LATEX)
    (workspace / "other.py").write_text("def unrelated():\n    pass\n")
    tool = find_symbol_tool(workspace)
    told = tool.run(ToolContext(workspace), FindSymbolArgs(name="formatter that writes LaTeX"))
    assert told.output.splitlines()[:2] == [
        "Definitions with the words 'formatter that writes LaTeX' in their names or "
        "docstrings, best first:",
        "  latex.py:4 class LatexFormatter — Format tokens as LaTeX code.",
    ]
    assert "other.py" not in told.output
    nothing = tool.run(ToolContext(workspace), FindSymbolArgs(name="spaceship telemetry"))
    assert nothing.output.startswith("No definition of anything with the words")
    assert found_nothing("find_symbol", nothing.output), "a search that found nothing, to cite"
    with pytest.raises(ToolError, match="neither a name nor words"):
        tool.run(ToolContext(workspace), FindSymbolArgs(name="!!! ?? --"))
    long = tool.run(ToolContext(workspace), FindSymbolArgs(name="LaTeX " + "x" * 5000))
    assert len(long.output) < 2000, "the words are cut, and so is the line saying them"


def test_a_map_cached_before_summaries_were_kept_is_read_again(workspace: Path) -> None:
    (workspace / "latex.py").write_text(LATEX)
    build(workspace)
    cache = state.workspace_dir(workspace, "repo_map") / "map.sqlite"
    with sqlite3.connect(cache) as db:  # as the map's cache was written before
        for digest, data in list(db.execute("SELECT digest, data FROM symbols")):
            old = json.loads(data)
            old["definitions"] = [row[:3] for row in old["definitions"]]
            db.execute("UPDATE symbols SET data = ? WHERE digest = ?", (json.dumps(old), digest))
    index.forget_parsed()
    again = build(workspace).files["latex.py"].definitions
    assert again[0].summary == "Format tokens as LaTeX code."


def test_each_question_is_owed_its_room_however_few_its_words(workspace: Path) -> None:
    """Scores are not comparable across questions: one asked in more words scores
    higher. Each question's best file is taken in turn, so a short question's file is
    shown even when a long one's files would fill the room."""
    for n in range(6):
        (workspace / f"render_{n}.py").write_text(
            f'def render_html_page_template_{n}():\n    """Render the HTML page template."""\n'
        )
    (workspace / "zeta.py").write_text('def zeta():\n    """Zeta."""\n')
    task = "Answer each.\n1. Which file renders the HTML page template?\n2. Where is zeta?"
    shown = rendered(build(workspace), task, max_chars=700)
    assert "`zeta.py`\n  1: function zeta — Zeta." in shown


def test_find_symbol_takes_a_name_in_any_script_python_allows(workspace: Path) -> None:
    (workspace / "maße.py").write_text("def größe():\n    return 1\n")
    tool = find_symbol_tool(workspace)
    told = tool.run(ToolContext(workspace), FindSymbolArgs(name="größe")).output
    assert told.startswith("größe is defined in:\n  maße.py:1 function größe")
