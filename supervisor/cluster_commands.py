"""`gaffer cluster status`: the Ray cluster `--cluster` would place workers on, node by
node: alive or not, free and total reader and sandbox slots, and whether the node's
Docker engine has this gaffer's sandbox image."""

from __future__ import annotations

import click

from supervisor.exits import fail
from supervisor.terminal import echo


@click.group()
def cluster() -> None:
    """The Ray cluster workers can be placed on (--cluster)."""


@cluster.command()
@click.option(
    "--cluster",
    "address",
    envvar="GAFFER_RAY_ADDRESS",
    help="ray://HOST:PORT of the cluster [env GAFFER_RAY_ADDRESS].",
)
def status(address: str | None) -> None:
    """Each node: alive, free/total reader and sandbox slots, sandbox image present."""
    if not address:
        fail("say which cluster: --cluster ray://HOST:PORT, or set GAFFER_RAY_ADDRESS")
    from workers.cluster.driver import Cluster
    from workers.sandbox import SandboxFault, SandboxUnavailable
    from workers.sandbox.options import DockerOptions

    try:
        joined = Cluster(address)
        joined.connect()
        rows = joined.status(DockerOptions().image)
    except (SandboxUnavailable, SandboxFault) as error:
        fail(str(error))
    echo(f"{'node':<22} {'state':<6} {'readers':>9} {'sandboxes':>10}  image")
    for row in rows:
        echo(
            f"{row.node:<22} {'alive' if row.alive else 'dead':<6} "
            f"{row.readers[0]:>4}/{row.readers[1]:<4} {row.sandboxes[0]:>5}/{row.sandboxes[1]:<4}  "
            f"{row.image}"
        )
    joined.shutdown()
