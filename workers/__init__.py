"""What runs an agent: the one loop for every agent (loop.py), tools, sandboxes, models."""
