"""The transport ladder (zerocopy, staged, serialised, rpc-lite, rpc-lite-sw, rpc-proto, rpc,
rpc-pipelined): each rung differs from the one below in one declared factor, every rung runs
All-Reduces exactly on loopback ranks, counts the copies it makes, and a worker records its
CPU time and copied bytes per collective."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from collective_helpers import allreduce_counts, inputs

from testbed.core.registry import TRANSPORTS
from testbed.core.traces import read_table
from workloads.launcher import local_configs, run_local
from workloads.transports.base import LADDER_FACTORS, Endpoint, LinkSpec, Tag
from workloads.transports.ladder import changed_factors, ladder
from workloads.transports.rpclite import RpcLiteLink
from workloads.transports.rpclitesw import RpcLiteStopAndWaitLink
from workloads.transports.rpcpipelined import RpcPipelinedLink
from workloads.transports.serialised import SerialisedLink
from workloads.transports.tensorproto import message_class, read_tensor, transfer

LADDER = ["zerocopy", "staged", "serialised", "rpc-lite", "rpc-lite-sw", "rpc-proto", "rpc",
          "rpc-pipelined"]
# The one factor each step up the ladder changes.
STEPS = ["copies", "message", "calls", "calls", "framework", "message", "calls"]
# Copies a byte moved, as each rung counts its own (both sides together).
COPIES = {"zerocopy": 0, "staged": 2, "serialised": 7, "rpc-lite": 7, "rpc-lite-sw": 7,
          "rpc-proto": 6, "rpc": 4, "rpc-pipelined": 4}


@pytest.mark.parametrize("transport", LADDER)
@pytest.mark.parametrize(("world", "algorithm"), [(2, "ring"), (3, "ring"),
                                                  (4, "halving-doubling")])
def test_every_rung_reduces_exactly(tmp_path, transport, world, algorithm) -> None:
    counts = [1, 7, 100_003]
    cfgs = local_configs(ranks=world, dims=[world], algorithm=algorithm, sizes=[4],
                         out_dir=tmp_path, transport=transport, timeout=20.0)
    want = [np.sum([inputs(r, c) for r in range(world)], axis=0) for c in counts]
    for rank_out in allreduce_counts(cfgs, counts):
        for w, buf in zip(want, rank_out, strict=True):
            np.testing.assert_array_equal(buf, w)


@pytest.mark.parametrize("transport", LADDER)
def test_workers_record_cpu_and_the_copies_each_rung_counts(tmp_path, transport) -> None:
    size = 1 << 20
    res = run_local(ranks=2, sizes=[size], transport=transport, iterations=2, warmup=1,
                    timeout=30.0, out_dir=tmp_path)
    assert all(r.correct for r in res.rows)
    colls = read_table(tmp_path, "collectives").to_pandas()
    phases = read_table(tmp_path, "phases").to_pandas()
    colls, phases = colls[~colls["warmup"]], phases[~phases["warmup"]]
    assert (colls["cpu"] > 0).all()
    # a 2-rank ring sends S per rank: the copies a byte are the copied bytes over those
    copies = colls["copied_bytes"].sum() / phases["sent_bytes"].sum()
    assert copies == pytest.approx(COPIES[transport], abs=0.01)


def test_the_ladder_is_registered_and_only_rpc_is_the_reference() -> None:
    assert set(LADDER) <= set(TRANSPORTS.names())
    assert TRANSPORTS.references() == ("rpc",)
    assert [TRANSPORTS.get(t).wire_speed for t in LADDER] == [True] + [False] * 7


def test_the_declared_ladder_is_a_chain_of_one_factor_steps() -> None:
    rungs = ladder()
    assert [c.name for c in rungs] == LADDER
    assert [c.rung for c in rungs] == list(range(len(LADDER)))
    for c in rungs:
        assert sorted(c.factors) == sorted(LADDER_FACTORS), c.name
    for lower, upper, factor in zip(rungs[:-1], rungs[1:], STEPS, strict=True):
        assert changed_factors(lower, upper) == [factor], (lower.name, upper.name)
        assert upper.adds.startswith(f"{factor}: "), upper.name


def test_a_step_changing_two_factors_is_seen() -> None:
    zerocopy, rpc = TRANSPORTS.get("zerocopy"), TRANSPORTS.get("rpc")
    assert changed_factors(zerocopy, rpc) == ["calls", "copies", "framework"]


@pytest.mark.parametrize(("link_class", "window"), [(RpcLiteLink, 8), (RpcLiteStopAndWaitLink, 1)])
def test_rpc_lite_keeps_its_window_of_calls_in_flight(monkeypatch, link_class, window) -> None:
    monkeypatch.setattr(SerialisedLink, "send", lambda self, tag, arr: None)
    link = link_class.__new__(link_class)
    link._calls = link._answered = 0
    unanswered = []

    def answer(tag):
        unanswered.append(link._calls - link._answered)
        link._answered += 1

    link._await_response = answer
    for step in range(20):
        link.send(Tag(0, 0, 0, step), np.empty(0, dtype=np.float32))
    assert max(unanswered) == window and link._calls - link._answered == window - 1


class _Reply:
    """A grpc call future whose reply comes when the test says so."""

    def __init__(self) -> None:
        self.arrived = threading.Event()

    def result(self):
        assert self.arrived.wait(5.0)
        return b""


def test_rpc_pipelined_keeps_8_calls_in_flight_and_waits_for_the_oldest() -> None:
    replies: list[_Reply] = []

    class Call:
        def future(self, payload, timeout):
            replies.append(_Reply())
            return replies[-1]

    spec = LinkSpec(0, 0, 1, 1, Endpoint("127.0.0.1", 1), Endpoint("127.0.0.1", 2))
    link = RpcPipelinedLink(0, spec, 5.0, Call(), mailbox=None)
    arr = np.ones(4, dtype=np.float32)
    for step in range(8):
        link.send(Tag(0, 0, 0, step), arr)
    ninth = threading.Thread(target=link.send, args=(Tag(0, 0, 0, 8), arr))
    ninth.start()
    ninth.join(0.2)
    assert ninth.is_alive() and len(replies) == 8  # the 9th waits for a reply
    replies[0].arrived.set()
    ninth.join(5.0)
    assert not ninth.is_alive() and len(replies) == 9
    for r in replies:
        r.arrived.set()
    link.close()
    assert not link._in_flight


def test_a_transfer_message_round_trips_and_rejects_a_wrong_tensor() -> None:
    arr = np.arange(10, dtype=np.float32)
    msg, copied = transfer(1, 2, 3, Tag(4, 5, 6, 7, 8), arr)
    assert copied == 2 * arr.nbytes
    back = message_class("Transfer").FromString(msg.SerializeToString())
    assert (back.sender, back.channel, back.slot, back.coll, back.slice) == (1, 2, 3, 4, 8)
    out = np.empty(10, dtype=np.float32)
    read_tensor(back.tensor, out, "here")
    np.testing.assert_array_equal(out, arr)
    with pytest.raises(Exception, match="expected float32 and 36 bytes"):
        read_tensor(back.tensor, np.empty(9, dtype=np.float32), "here")
