"""The check: the command that decides whether the workspace is right, chosen once per run
(choose.py), run by gaffer itself where the agent cannot steer it."""
