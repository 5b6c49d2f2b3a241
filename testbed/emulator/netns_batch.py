"""Feed iproute2 batch commands (``ip -batch -``, ``bridge -batch -``) to a node's network
namespace on standard input.

A batch file is a program (``netns exec`` runs any command), so it is never written where
anyone could swap it before root runs it: the lines go through a pipe. The tool is the root
filesystem's, entered into the namespace with ``nsenter --net``, never a container image's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable


def run_batch(pid: int, argv: list[str], lines: Iterable[str]) -> str | None:
    """Run ``argv`` (e.g. ``["ip", "-batch", "-"]``) in the network namespace of ``pid`` with
    ``lines`` on its standard input; None when it succeeded, else what it said."""
    out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *argv],
                         input="".join(f"{line}\n" for line in lines),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return (out.stderr or out.stdout).strip() or f"{argv[0]} exited {out.returncode}"
    return None
