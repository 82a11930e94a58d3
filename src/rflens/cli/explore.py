"""``python -m rflens explore``: the bias and receptive-field explorers in a browser, with a live kernel."""

from __future__ import annotations

import os
import subprocess
import sys

from rflens.errors import UserError
from rflens.setup import presets


def run(args) -> int:
    from rflens.widgets.explore import NOTEBOOK

    presets.get(args.scale)  # an unknown name: one line naming the choices
    if not 0 < args.port < 65536:
        raise UserError(f"--port must be between 1 and 65535, not {args.port}")
    _check_port_free(args.port)
    try:
        import voila  # noqa: F401
    except ImportError:
        raise UserError("explore needs Voilà, in rflens's extra 'explore': pip install 'rflens[explore]' "
                        "(in a clone: make setup, or pip install '.[explore]')") from None
    cmd = [sys.executable, "-m", "voila", str(NOTEBOOK), f"--port={args.port}", "--Voila.ip=127.0.0.1",
           "--theme=light", "--show_tracebacks=False",
           "--Voila.port_retries=0"]  # the port printed below is the one served, or none: never the next one free
    if args.no_browser:
        cmd.append("--no-browser")
    print(f"explorers of the {args.scale} book at http://127.0.0.1:{args.port}/ (Ctrl-C stops the server)",
          file=sys.stderr, flush=True)
    try:
        return subprocess.run(cmd, env={**os.environ, "RFLENS_SCALE": args.scale}).returncode
    except KeyboardInterrupt:
        return 0


def _check_port_free(port: int) -> None:
    """UserError naming ``--port`` when something already listens on 127.0.0.1:``port``
    (Voilà would otherwise serve the next free port, not the one printed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a closed one's TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise UserError(f"--port {port} is in use on 127.0.0.1 ({err.strerror or err}): give a free one, "
                            f"e.g. --port {port + 1 if port < 65535 else port - 1}") from None
