"""How fabriclab reaches a server of a servers file (:mod:`testbed.core.servers`): the one
place an ssh command line is made.

:func:`ssh_command` is the argv prefix (options, then ``user@host``): append one remote
command string. It never asks anything (``BatchMode``), uses only the given key when one is
given, trusts only the given known_hosts file when one is given (no trust on first use), and
notices a dead server within seconds (``ServerAliveInterval``). A stand-in server (one with
``netns``) is reached through :mod:`testbed.emulator.ssh_proxy`, which connects from inside
its namespace and passes the socket to ssh (``ProxyUseFdpass``).

:func:`run` runs one remote command and returns its output.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from testbed.core.servers import ServerSpec, ServersSpec

CONNECT_TIMEOUT_S = 10
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3  # unanswered keep-alives before ssh gives up: a dead server is noticed in 15 s
RUN_TIMEOUT_S = 60.0
PROXY = Path(__file__).with_name("ssh_proxy.py")


def proxy_command(server: ServerSpec) -> str:
    """The ``ProxyCommand`` reaching ``server``'s sshd inside its namespace. ssh hands it to a
    shell, so every word is quoted; ``%`` is doubled, as ssh expands ``%h``-style tokens in
    it. The proxy runs by its path with ``-I``: no ``PYTHONPATH`` or user site is involved."""
    assert server.netns is not None
    words = [sys.executable, "-I", str(PROXY), server.netns, server.host, str(server.port)]
    return " ".join(shlex.quote(w) for w in words).replace("%", "%%")


def ssh_options(server: ServerSpec, spec: ServersSpec, tty: bool = False) -> list[str]:
    """:func:`ssh_command` without the destination (for tools that add ``user@host``
    themselves)."""
    argv = ["ssh", "-o", "BatchMode=yes"]
    if server.identity is not None:
        argv += ["-o", "IdentitiesOnly=yes", "-i", server.identity]
    if spec.known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={spec.known_hosts}",
                 "-o", "StrictHostKeyChecking=yes"]
    argv += ["-p", str(server.port),
             "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
             "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
             "-o", f"ServerAliveCountMax={ALIVE_COUNT}"]
    if tty:
        argv.append("-tt")
    if server.netns is not None:
        argv += ["-o", f"ProxyCommand={proxy_command(server)}", "-o", "ProxyUseFdpass=yes"]
    return argv


def ssh_command(server: ServerSpec, spec: ServersSpec, tty: bool = False) -> list[str]:
    """The argv that reaches ``server`` over ssh, ending with ``user@host``: append the
    remote command (one string; ssh hands it to the remote shell)."""
    return [*ssh_options(server, spec, tty), server.ssh]


def run(server: ServerSpec, spec: ServersSpec, argv: list[str], input: str | None = None,
        timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` on ``server`` (each word quoted, as ssh sends one string to the remote
    shell); its output as text. Exit status 255 is ssh's own failure (stderr says why).
    Raises :class:`subprocess.TimeoutExpired` after ``timeout_s``."""
    return subprocess.run([*ssh_command(server, spec), shlex.join(argv)], input=input,
                          stdin=subprocess.DEVNULL if input is None else None,
                          capture_output=True, text=True, timeout=timeout_s)


def why_failed(out: subprocess.CompletedProcess[str]) -> str:
    """One line saying why a :func:`run` failed: the netns proxy's own sentence if it said
    one (ssh's last line then only says the proxy passed nothing back), else stderr's last
    line, else the exit status."""
    lines = out.stderr.strip().splitlines()
    proxy = [line for line in lines if line.startswith("ssh_proxy: ")]
    return (proxy or lines or [f"exit status {out.returncode}"])[-1]
