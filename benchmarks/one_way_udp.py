"""One-way delays of UDP datagrams between two hosts of one machine, which share one clock.

Run inside the hosts (``benchmarks/link_impairments.py --one-way`` does):

    one_way_udp.py recv PORT COUNT TIMEOUT_S     prints one delay (ms) per datagram received
    one_way_udp.py send ADDRESS PORT COUNT INTERVAL_S

Each datagram carries the sender's clock (``CLOCK_REALTIME``, ns) read just before it is sent;
the receiver takes the kernel's receive stamp (``SO_TIMESTAMPNS``, the same clock, stamped when
the packet arrives, before the receiver is scheduled). A delay is the second less the first:
the links' delay plus the sending stack's, without either process's wake-up lateness, which
round trips of ``ping -U`` carry twice.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

SO_TIMESTAMPNS = 35  # Linux, <asm-generic/socket.h>; SCM_TIMESTAMPNS has the same value
TIMESPEC = struct.Struct("@qq")
STAMP = struct.Struct("!q")


def receive(port: int, count: int, timeout_s: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(timeout_s)
    print("ready", flush=True)
    for _ in range(count):
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(64, socket.CMSG_SPACE(TIMESPEC.size))
        except TimeoutError:
            break
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, ns = TIMESPEC.unpack(value[:TIMESPEC.size])
                sent_ns = STAMP.unpack(data[:STAMP.size])[0]
                print(f"{(seconds * 1_000_000_000 + ns - sent_ns) / 1e6:.4f}", flush=True)


def send(address: str, port: int, count: int, interval_s: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start = time.monotonic()
    for k in range(count):
        time.sleep(max(0.0, start + k * interval_s - time.monotonic()))
        sock.sendto(STAMP.pack(time.time_ns()), (address, port))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "recv":
        receive(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit("usage: one_way_udp.py recv PORT COUNT TIMEOUT_S | "
                 "send ADDRESS PORT COUNT INTERVAL_S")
