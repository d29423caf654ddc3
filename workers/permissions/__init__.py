"""What each agent may run: the user's permission rules (rules.py, matched against
commands as bash reads them: commands.py), the approval mode (modes.py), and the gate
that judges every call of every agent against them and asks the user (gate.py)."""
