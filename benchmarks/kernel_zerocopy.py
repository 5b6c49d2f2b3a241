"""MSG_ZEROCOPY against send; BENCHMARKS.md "What the kernel offers for real zero copy".

What the kernel offers for real zero-copy sends: ``MSG_ZEROCOPY`` against a plain ``send``
of the same buffer, on loopback and over veth (2 fabric hosts on a kernel-bridge switch,
root), with the kernel's own word on whether it copied anyway.

    python benchmarks/kernel_zerocopy.py [--total 256MiB] [--chunk 1MiB] [--repeats 5]
    sudo flock /tmp/fabriclab-roottests.lock .venv/bin/python benchmarks/kernel_zerocopy.py \\
        --veth --mbit-s 1000

io_uring's zero-copy send (``IORING_OP_SEND_ZC``) is measured too when the ``liburing``
package (io_uring bindings, PyPI) is installed.

A ``MSG_ZEROCOPY`` send pins the pages and completes through the socket's error queue: every
notification says which sends it covers and, with ``SO_EE_CODE_ZEROCOPY_COPIED``, that the
kernel copied the data after all (it does when the receiver is a local socket, as it is over
loopback and over veth between namespaces). Prints, per path and mode, the sender's wall time
and CPU seconds per GB (median [min, max] of the repeats, modes alternated) and the share of
zero-copy sends the kernel reported copied. Python lacks the constants; they are Linux's.
"""

from __future__ import annotations

import argparse
import json
import resource
import select
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

from testbed.core.units import format_spread, parse_size

SO_ZEROCOPY = 60
MSG_ZEROCOPY = 0x4000000
SO_EE_ORIGIN_ZEROCOPY = 5
SO_EE_CODE_ZEROCOPY_COPIED = 1
EXTENDED_ERR = struct.Struct("=IBBBBII")  # struct sock_extended_err
MODES = ("plain", "zerocopy", "uring-zc")


def serve(port: int) -> None:
    """Accept one connection per line of stdin's count, read each to EOF, then exit."""
    lst = socket.create_server(("0.0.0.0", port))
    print("ready", flush=True)
    buf = memoryview(bytearray(4 << 20))
    while True:
        conn, _ = lst.accept()
        with conn:
            while conn.recv_into(buf):
                pass


class Notifications:
    """Reads a socket's zero-copy completions: sends completed, and those the kernel copied."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.done, self.copied = sock, 0, 0
        self._poll = select.poll()
        self._poll.register(sock, 0)  # POLLERR (a completion waiting) is always reported

    def drain(self, block: bool) -> None:
        while True:
            if block:
                self._poll.poll(5000)
            try:
                _, anc, _, _ = self.sock.recvmsg(0, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            for _level, _type, data in anc:
                _errno, origin, _t, code, _pad, lo, hi = EXTENDED_ERR.unpack_from(data)
                if origin == SO_EE_ORIGIN_ZEROCOPY:
                    self.done += hi - lo + 1
                    self.copied += (hi - lo + 1) if code & SO_EE_CODE_ZEROCOPY_COPIED else 0
            block = False


class UringZc:
    """io_uring's zero-copy send (``IORING_OP_SEND_ZC``, through the ``liburing`` package),
    one send in flight; each completes with its result and then a notification whose usage
    flag says whether the kernel copied."""

    def __init__(self, sock: socket.socket) -> None:
        import liburing

        self.lib, self.fd = liburing, sock.fileno()
        self.ring, self.cqe = liburing.Ring(), liburing.Cqe()
        liburing.io_uring_queue_init(8, self.ring)
        self.done = self.copied = 0

    def send(self, data: bytes) -> int:
        lib = self.lib
        sqe = lib.io_uring_get_sqe(self.ring)
        lib.io_uring_prep_send_zc(sqe, self.fd, data, 0, lib.IORING_SEND_ZC_REPORT_USAGE)
        lib.io_uring_submit(self.ring)
        sent, more = 0, True
        while more:
            lib.io_uring_wait_cqe(self.ring, self.cqe)
            entry = self.cqe[0]
            flags = entry.flags
            try:
                res = entry.res
            except OSError as exc:  # the package reads a notification's usage flag as an errno
                res = exc.errno & 0xFFFFFFFF
            lib.io_uring_cqe_seen(self.ring, entry)
            if flags & lib.IORING_CQE_F_NOTIF:
                self.done += 1
                self.copied += bool(res & lib.IORING_NOTIF_USAGE_ZC_COPIED)
            elif res >= 0x80000000:
                raise OSError(0x100000000 - res, "io_uring send failed")
            else:
                sent = res
            more = bool(flags & lib.IORING_CQE_F_MORE)
        return sent

    def close(self) -> None:
        self.lib.io_uring_queue_exit(self.ring)


def send(host: str, port: int, mode: str, total: int, chunk: int) -> dict:
    """Send ``total`` bytes in ``chunk``-byte sends of one buffer; wall and CPU seconds."""
    sock = socket.create_connection((host, port))
    zc = mode == "zerocopy"
    if zc:
        sock.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    note = UringZc(sock) if mode == "uring-zc" else Notifications(sock)
    data = b"x" * chunk
    buf = memoryview(data)
    calls = 0
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    sent = 0
    while sent < total:
        view = buf[: min(chunk, total - sent)]
        while len(view):
            try:
                if mode == "uring-zc":
                    n = note.send(data[len(data) - len(view):] if len(view) < len(data)
                                  else data)
                else:
                    n = sock.send(view, MSG_ZEROCOPY if zc else 0)
            except OSError as exc:  # ENOBUFS: too many unfinished zero-copy sends
                if exc.errno != 105:
                    raise
                note.drain(block=True)
                continue
            calls += 1
            view, sent = view[n:], sent + n
        if zc:
            note.drain(block=False)
    while zc and note.done < calls:
        note.drain(block=True)
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)  # the receiver's close: everything arrived
    seconds = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    sock.close()
    if mode == "uring-zc":
        note.close()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"mode": mode, "seconds": seconds, "cpu_s": cpu, "calls": calls,
            "copied_share": note.copied / note.done if note.done else None}


def available_modes() -> tuple[str, ...]:
    """The modes this Python can run (io_uring's needs the ``liburing`` package)."""
    try:
        import liburing  # noqa: F401
    except ImportError:
        print("# uring-zc skipped: pip install liburing (io_uring bindings) to measure it")
        return MODES[:2]
    return MODES


def measure(start, host: str, port: int, args) -> dict[str, list[dict]]:
    """``start(args) -> Popen`` runs this script somewhere (a host, or here)."""
    me = [sys.executable, str(Path(__file__).resolve())]
    receiver = start([*me, "--serve", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        receiver.stdout.readline()
        modes = available_modes()
        got: dict[str, list[dict]] = {m: [] for m in modes}
        for r in range(args.repeats):
            for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
                out = start([*me, "--send", host, str(port), mode, str(args.total),
                             str(args.chunk)], stdout=subprocess.PIPE, text=True)
                got[mode].append(json.loads(out.communicate(timeout=300)[0]))
        return got
    finally:
        receiver.kill()
        receiver.wait()


def report(got: dict[str, list[dict]], where: str, total: int) -> None:
    print(f"## {where}: {len(got['plain'])} repeats, modes alternated")
    for mode, rows in got.items():
        shares = [r["copied_share"] for r in rows if r["copied_share"] is not None]
        copied = f"{statistics.median(shares):.0%}" if shares else "-"
        print(f"{mode:>9}: {format_spread([total / r['seconds'] / 1e9 for r in rows])} GB/s, "
              f"{format_spread([r['cpu_s'] / total * 1e9 for r in rows])} sender CPU s/GB, "
              f"kernel reported copied: {copied}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve(int(argv[1]))
        return 0
    if argv[:1] == ["--send"]:
        host, port, mode, total, chunk = argv[1:6]
        print(json.dumps(send(host, int(port), mode, int(total), int(chunk))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total", type=parse_size, default="256MiB")
    p.add_argument("--chunk", type=parse_size, default="1MiB")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--veth", action="store_true")
    p.add_argument("--mbit-s", type=float, default=1000.0)
    args = p.parse_args(argv)
    port = 47000
    if not args.veth:
        report(measure(lambda a, **kw: subprocess.Popen(a, **kw), "127.0.0.1", port, args),
               "loopback", args.total)
        return 0
    import tempfile

    from testbed.core.spec import parse_fabric
    from testbed.core.topology import build_plan
    from testbed.emulator.fabric import Fabric

    plan = build_plan(parse_fabric({"fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": args.mbit_s, "kind": "switch"}]}}))
    with tempfile.TemporaryDirectory() as tmp, \
            Fabric(plan, Path(tmp) / "f", switches="kernel") as fab:
        ip = plan.node("h1").ip(0)
        got = measure(lambda a, **kw: fab.popen("h0" if "--send" in a else "h1", a, **kw),
                      ip, port, args)
    report(got, f"veth, 2 hosts on a kernel bridge at {args.mbit_s:g} Mbit/s", args.total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
