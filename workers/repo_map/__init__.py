"""A map of the workspace's code: each source file's top-level symbols with their lines
(`symbols.py`), read once per file content and cached in the state folder (`index.py`),
and ranked toward a task and sized to a share of the model's window (`ranking.py`)."""
