"""benchmarks/one_way_udp.py on loopback: every datagram sent is read back as one delay, from the
sender's clock to the kernel's receive stamp (no root)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "one_way_udp.py"


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_datagram_sent_reads_back_as_one_small_delay():
    port, count = _free_udp_port(), 20
    receiver = subprocess.Popen([sys.executable, str(SCRIPT), "recv", str(port), str(count), "10"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, str(SCRIPT), "send", "127.0.0.1", str(port), str(count),
                        "0.005"], check=True, timeout=30)
        out, _ = receiver.communicate(timeout=30)
    finally:
        receiver.kill()
        receiver.wait()
    delays_ms = [float(x) for x in out.split()]
    assert len(delays_ms) == count
    # loopback has no delay: each is the sending stack's time, far under a second, and the
    # kernel's stamp never precedes the sender's clock
    assert all(0 <= d < 1000 for d in delays_ms)


def test_a_wrong_call_says_how_to_call_it():
    done = subprocess.run([sys.executable, str(SCRIPT), "recv"], capture_output=True, text=True)
    assert done.returncode != 0 and "usage: one_way_udp.py" in done.stderr
