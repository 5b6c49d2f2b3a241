"""Qdisc statistics of every shaped interface, read many times a second at little cost.

One long-lived ``tc -s -j -batch -`` per network namespace: the root namespace (every switch
port) and each host's (entered with ``nsenter`` through the host's PID). Each read writes
``qdisc show`` to all of them and reads one JSON line back from each; no process is started per
sample. The readers are this process's children: they are stopped through their handles (and
must be, before the hosts' namespaces go), recorded as the run's processes when a ``record``
is given, and exit by themselves when this process dies (their stdin closes).
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

ROOT_NS: int | None = None  # the namespace key of the root namespace
READ_TIMEOUT_S = 0.5
RETRY_S = 1.0


@dataclass(frozen=True)
class QdiscSample:
    """The root qdisc of one interface: bytes it sent (dequeued), bytes waiting, drops."""

    sent_bytes: int
    backlog_bytes: int
    drops: int


def parse_qdiscs(line: str) -> dict[str, QdiscSample]:
    """{interface: its root qdisc's counters} from one ``tc -s -j qdisc show`` line."""
    out = {}
    for q in json.loads(line):
        if q.get("root") and "dev" in q:
            out[q["dev"]] = QdiscSample(int(q.get("bytes", 0)), int(q.get("backlog", 0)),
                                        int(q.get("drops", 0)))
    return out


class _Reader:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def ask(self) -> None:
        self.proc.stdin.write("qdisc show\n")
        self.proc.stdin.flush()

    def answer(self, deadline: float) -> dict[str, QdiscSample] | None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            line = self.proc.stdout.readline()
            if not line:  # the reader ended (its namespace went away)
                return None
            if line.strip():
                return parse_qdiscs(line)

    def stop(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, not yet reaped: its PID is still ours
            self.proc.wait()


class QdiscStats:
    """``read()`` gives {(namespace, interface): :class:`QdiscSample`} for the root namespace
    (key :data:`ROOT_NS`) and the namespace of each of ``ns_pids`` (key: the PID): the
    hosts', and kernel bridges' if the switches are."""

    def __init__(self, ns_pids: list[int],
                 record: Callable[[int], object] | None = None) -> None:
        self.namespaces: list[int | None] = [ROOT_NS, *sorted(set(ns_pids))]
        self.record = record  # called with each reader's PID while it is our unreaped child
        self._readers: dict[int | None, _Reader] = {}
        self._retry_at: dict[int | None, float] = {}
        self.restarts = 0  # readers replaced after a late answer or an early end

    def start(self) -> None:
        for ns in self.namespaces:
            self._spawn(ns)

    def _spawn(self, ns: int | None) -> None:
        prefix = [] if ns is ROOT_NS else ["nsenter", f"--net=/proc/{ns}/ns/net"]
        reader = _Reader([*prefix, "tc", "-s", "-j", "-batch", "-"])
        self._readers[ns] = reader
        if self.record is not None:
            self.record(reader.proc.pid)

    def _drop(self, ns: int | None) -> None:
        """Stop a reader that failed; a new one is tried after RETRY_S (its host may be gone
        for good: then every try fails fast, once a RETRY_S)."""
        self._readers.pop(ns).stop()
        self._retry_at[ns] = time.monotonic() + RETRY_S
        self.restarts += 1

    def read(self) -> dict[tuple[int | None, str], QdiscSample]:
        """One round: every namespace's qdiscs (a namespace that does not answer within
        :data:`READ_TIMEOUT_S` is missing from this round)."""
        now = time.monotonic()
        for ns, at in list(self._retry_at.items()):
            if at <= now:
                del self._retry_at[ns]
                self._spawn(ns)
        live = {}
        for ns, r in list(self._readers.items()):
            try:
                r.ask()
                live[ns] = r
            except (OSError, ValueError):  # its process ended
                self._drop(ns)
        deadline = time.monotonic() + READ_TIMEOUT_S
        out = {}
        for ns, r in live.items():
            answer = r.answer(deadline)
            if answer is None:  # late or gone: a late answer would be read as the next one's
                self._drop(ns)
                continue
            for intf, q in answer.items():
                out[(ns, intf)] = q
        return out

    def stop(self) -> None:
        for r in self._readers.values():
            r.stop()
        self._readers.clear()
        self._retry_at.clear()
