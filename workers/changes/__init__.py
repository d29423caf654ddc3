"""What agents change in the workspace, seen by the harness: snapshots, change sets, merges of isolated work, writes of a tree, undo and worktrees."""
