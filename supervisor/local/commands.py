"""`gaffer local pull|start|stop|status`: the bundled model and its server."""

from __future__ import annotations

import click

from supervisor.exits import fail
from supervisor.terminal import echo


@click.group()
def local() -> None:
    """The local model: Qwen2.5-Coder-1.5B served by llama.cpp on 127.0.0.1."""


@local.command(name="pull")
def local_pull() -> None:
    """Fetch and verify the model (once; cached under ~/.cache/gaffer/models)."""
    from supervisor.local import store as local_store
    from supervisor.run_setup import pull_with_progress

    try:
        path = local_store.model_path() if local_store.is_pulled() else pull_with_progress()
    except local_store.PullError as error:
        fail(str(error))
        return
    echo(f"model ready: {path}")


@local.command(name="start")
def local_start() -> None:
    """Start the server and leave it running for later runs."""
    from supervisor.local import server as local_server
    from supervisor.local import store as local_store
    from supervisor.run_setup import pull_with_progress

    if (found := local_server.running()) is not None:
        echo(f"already running: {found.base_url} (pid {found.pid})")
        return
    try:
        if not local_store.is_pulled():
            pull_with_progress()
        found, _ = local_server.start(detach=True)
    except (local_store.PullError, local_server.LocalUnavailable) as error:
        fail(str(error))
        return
    echo(
        f"serving {found.model} at {found.base_url} (pid {found.pid}); `gaffer local stop` ends it"
    )


@local.command(name="stop")
def local_stop() -> None:
    """Stop the server `gaffer local start` left running."""
    from supervisor.local import server as local_server

    echo("stopped" if local_server.stop_running() else "no local server was running")


@local.command(name="status")
def local_status() -> None:
    """Whether the model is pulled and the server running."""
    from supervisor.local import server as local_server
    from supervisor.local import store as local_store

    model = local_store.QWEN_CODER_1_5B
    pulled = local_store.is_pulled()
    echo(
        f"model   {model.name}: {'pulled, ' + str(local_store.model_path()) if pulled else 'not pulled (gaffer local pull)'}"
    )
    found = local_server.running()
    echo(
        f"server  {'running at ' + found.base_url + f' (pid {found.pid})' if found else 'not running'}"
    )
