"""Workers placed on a Ray cluster (`--cluster`): the driver (the user's gaffer) keeps
the loop, the model calls, the log and the workspace; a worker's tools run on a node,
on a checkout of the workspace sent once per batch as a git bundle (bundle.py), in the
node's own Docker sandbox for a `docker` profile (node.py). Editing workers send back
their change set, which comes into the workspace as an isolated editor's does."""
