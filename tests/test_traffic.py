"""iperf3 runs between fabric hosts: a UDP test whose stream setup was lost is run again."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from testbed.core.errors import FabricLabError
from testbed.emulator.traffic import UDP_SETUP_LOST, iperf_end


class FakeProcess:
    def __init__(self, out: str = "") -> None:
        self.out = out

    def communicate(self, timeout=None):
        return self.out, None

    def wait(self, timeout=None):
        return 0


class FakeFabric:
    """Clients print the given iperf3 JSON texts in turn; servers do nothing."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.clients = 0
        self.plan = SimpleNamespace(node=lambda name: SimpleNamespace(ip=lambda: "10.0.0.2"))

    def popen(self, host, argv, **_):
        if "-c" not in argv:
            return FakeProcess()
        self.clients += 1
        return FakeProcess(self.outputs.pop(0))

    def wait_listening(self, host, port):
        pass


LOST = json.dumps({"end": {}, "error": f"{UDP_SETUP_LOST}: Resource temporarily unavailable"})
GOOD = json.dumps({"end": {"sum": {"lost_packets": 2, "packets": 200}}})


def test_a_lost_udp_stream_setup_is_run_again():
    fab = FakeFabric([LOST, GOOD])
    assert iperf_end(fab, "h0", "h1", ["-u"]) == {"sum": {"lost_packets": 2, "packets": 200}}
    assert fab.clients == 2


def test_other_failures_and_repeated_losses_are_one_sentence():
    refused = json.dumps({"end": {}, "error": "unable to connect to server: Connection refused"})
    fab = FakeFabric([refused])
    with pytest.raises(FabricLabError, match="h0 -> h1 measured nothing: unable to connect"):
        iperf_end(fab, "h0", "h1", ["-u"])
    assert fab.clients == 1  # not retried
    fab = FakeFabric([LOST] * 3)
    with pytest.raises(FabricLabError, match="measured nothing"):
        iperf_end(fab, "h0", "h1", ["-u"], tries=3)
    assert fab.clients == 3
