from supervisor.cli import entry

entry()
