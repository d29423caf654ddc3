"""The `gaffer` command: settings, delegation to workers and their scheduling, logs, views."""
