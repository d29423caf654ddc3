"""The run log: the events an agent emits, their schema, and the JSONL writer."""
