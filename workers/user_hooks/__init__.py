"""The user's hooks: commands gaffer runs at moments of a run, as Claude Code's hooks do.

Moments: `pre_tool` (may block the call), `post_tool` (may add a note to the result),
`user_prompt` (may block the message, or add context to it), `agent_start`, `agent_end`
(with the agent's outcome), `session_end`, and `notification` (gaffer waits for the
user). Each hook gets one JSON object on stdin (payload.py says its keys) and answers
with its exit code, as in Claude Code: 0 goes on (a `user_prompt` hook's stdout is added
to the message), 2 blocks (`pre_tool`, `user_prompt`; stderr says why) or, after a tool,
tells the agent stderr as a note; any other code, a time-out or a flood is one line for
the user, and the run goes on.

Hooks come from the user's config and, once trusted, a workspace's (workers/trust.py).
They run on this machine with a clean environment (only the variables a hook names),
from a folder outside the workspace; a `post_tool` hook with `in_sandbox = true` runs
where the tool ran instead (a worker's container), so a formatter's change is in that
worker's change set (config.py, runner.py, fire.py).
"""
