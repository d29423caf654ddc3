"""`gaffer view [RUN]`: the run's timeline page (supervisor/timeline_page.py), written
beside its log; `--open` opens it in a browser, `--serve` serves it on 127.0.0.1, at a
secret URL, for a remote shell. Re-run it to refresh the page of a run that is still going."""

from __future__ import annotations

import secrets
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

import click

from supervisor import runlog
from supervisor.costs import dollars, prices_here, run_cost
from supervisor.exits import fail, log_dir_here
from supervisor.terminal import echo
from supervisor.timeline import build
from supervisor.timeline_page import render
from workers import host_programs, state

if TYPE_CHECKING:  # serving is rare; every `gaffer` command imports this module
    import http.server


def write_page(log: Path) -> Path:
    """The page of the run logged in `log`, as `<run>.html` beside it."""
    records = runlog.read_records(log)
    if not records:
        raise runlog.RunUnreadable(f"{log.name} has no lines yet")
    # Written as a new file moved into place: never through a link by that name.
    timeline = build(records, log)
    timeline.cost = dollars(run_cost(records, prices_here()))
    return state.write_file(log.parent, f"{log.stem}.html", render(timeline).encode())


@click.command()
@click.argument("run_ref", required=False, default="last")
@click.option("--log-dir", type=click.Path(path_type=Path), help="Where the run logs are.")
@click.option("--open", "open_page", is_flag=True, help="Open the page in a browser.")
@click.option("--serve", is_flag=True, help="Serve the page on 127.0.0.1 until Ctrl-C.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="The port for --serve.")
def view(run_ref: str, log_dir: Path | None, open_page: bool, serve: bool, port: int) -> None:
    """Write RUN's timeline page (default: the last run) beside its log: one lane per
    agent, model and tool calls as bars, totals and the critical path."""
    try:
        log = runlog.find_run(log_dir_here(log_dir), run_ref)
        page = write_page(log)
    except (runlog.RunNotFound, runlog.RunUnreadable, ValueError) as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot write the page beside {run_ref}'s log: {error}")
    echo(str(page))
    if open_page and not host_programs.open_page(page.resolve().as_uri()):
        echo("gaffer: no browser to open it with (set BROWSER); the page is above", err=True)
    if serve:
        _serve(page, port)


def _serve(page: Path, port: int) -> None:
    """Just this one page, on loopback only, at a path with a token of this serving's
    own: every user of the machine can reach 127.0.0.1, and the page holds the run's
    file contents, so only who was shown the URL gets it."""
    import http.server

    token = secrets.token_urlsafe(32)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _handler(page, token))
    echo(f"serving on http://127.0.0.1:{server.server_address[1]}/{token}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _handler(page: Path, token: str) -> type[http.server.BaseHTTPRequestHandler]:
    import http.server

    body = page.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # A page in a browser can be made to ask a name that resolves to 127.0.0.1
            # (DNS rebinding): only a request for this machine by its own name is served.
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            if host not in ("127.0.0.1", "localhost"):
                self._refuse(421)
                return
            asked = urllib.parse.urlsplit(self.path).path.strip("/")
            if not secrets.compare_digest(asked.encode(), token.encode()):
                self._refuse(404)  # not 403: nothing says a page is there
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            # The token is in the URL: never sent on to another site, never kept.
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    return Handler
