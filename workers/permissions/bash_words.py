"""What commands.py knows of bash and of the programs that run others: data only, as
workers/tools/shell_allowlist.py is for the shell policy."""

from __future__ import annotations

import re

# Wrappers that run the command after their own options, and the options that take a value.
WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "timeout": frozenset({"-k", "--kill-after", "-s", "--signal"}),
    "coproc": frozenset(),
    "busybox": frozenset(),
    "npx": frozenset({"-p", "--package"}),
    "xargs": frozenset(
        {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--delimiter"}
    ),
}
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh"})
SOURCES = frozenset({"source", "."})
STREAMS = ("/dev/", "/proc/")
# git's options before its subcommand that take a value, and those that change what a
# subcommand does (an alias, a program to run): past them the subcommand is not known.
GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
GIT_UNKNOWN = ("-c", "--config-env", "--exec-path")
GIT_PROGRAM_KEYS = (
    "alias.",
    "core.",
    "diff.",
    "merge.",
    "credential.",
    "filter.",
    "sequence.",
    "gpg.",
    "ssh.",
    "uploadpack.",
    "receivepack.",
    "include",
)
MAX_DEPTH = 8
# The syntax whose commands the walk sees for what they are (anything else: _unread).
UNDERSTOOD = {
    "program", "list", "pipeline", "subshell", "compound_statement", "redirected_statement",
    "command", "command_name", "word", "string", "string_content", "raw_string", "number",
    "concatenation", "simple_expansion", "expansion", "variable_name", "command_substitution",
    "process_substitution", "if_statement", "elif_clause", "else_clause", "while_statement",
    "for_statement", "do_group", "case_statement", "case_item", "function_definition",
    "negated_command", "file_redirect", "file_descriptor", "heredoc_redirect",
    "heredoc_start", "heredoc_body", "heredoc_content", "heredoc_end", "herestring_redirect",
    "variable_assignment", "comment", "test_command", "test_operator", "unary_expression",
    "binary_expression", "ansi_c_string", "declaration_command", "extglob_pattern",
    "subscript",
}  # fmt: skip
AT_OPERATOR = re.compile(r"@[A-Za-z]")  # ${x@P}, ${x@E}: transformations
INDEX = re.compile(r"\[([^\]]*)\]")
RISKY_PREFIXES = ("GIT_", "LD_", "BASH_", "DYLD_")
RISKY_VARIABLES = frozenset(
    {"ENV", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PAGER", "EDITOR",
     "VISUAL", "IFS"}
)  # fmt: skip
# Words that are bash's own syntax, never a program: seen as a command's name (`time {`,
# `! if …`), the parser has misread the line.
KEYWORDS = frozenset(
    [
        "{",
        "}",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "while",
        "until",
        "do",
        "done",
        "function",
        "select",
        "time",
        "coproc",
        "!",
        "[[",
        "]]",
    ]
)
# Programs that change what later words run: an alias, a remembered path, a builtin.
REDEFINERS = frozenset({"alias", "shopt", "hash", "enable"})
# What a plain line (one an allow rule may cover) is made of.
PLAIN = {
    "program",
    "list",
    "pipeline",
    "command",
    "command_name",
    "word",
    "string",
    "string_content",
    "raw_string",
    "number",
    "concatenation",
    "redirected_statement",
    "file_redirect",
    "file_descriptor",
}
