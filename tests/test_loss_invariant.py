"""The loss invariant and the registered-invariant interface (pure, on hand-made run files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.invariant import judge_all
from analysis.loss_invariant import SEGMENTS_PER_DROP, UNEXPLAINED_SEGMENTS
from testbed.core.registry import INVARIANTS

MB = 1_000_000


def _run(tmp_path: Path, *, leaf_out: float, fast_retrans: int = 0, drops: int = 0,
         ports: dict | None = None, timeouts: int = 0, dsack: dict | None = None) -> Path:
    """h0 -> leaf0 -> h1 for 10 s: h0's queue hands leaf0 10 MB, leaf0's queue sends
    ``leaf_out`` and drops ``drops`` packets; h0 fast-retransmits ``fast_retrans`` segments."""
    rows = []
    for t in (0.0, 10.0):
        k = t / 10
        rows += [{"time": 100 + t, "link": "l0", "src": "h0", "dst": "leaf0",
                  "capacity_mbit_s": 10.0, "sent_bytes": int(10 * MB * k), "backlog_bytes": 0,
                  "drops": 0},
                 {"time": 100 + t, "link": "l1", "src": "leaf0", "dst": "h1",
                  "capacity_mbit_s": 10.0, "sent_bytes": int(leaf_out * k), "backlog_bytes": 0,
                  "drops": int(drops * k)}]
    pd.DataFrame(rows).to_parquet(tmp_path / "qdisc_samples.parquet")
    (tmp_path / "topology.json").write_text(json.dumps(
        {"hosts": [{"name": "h0"}, {"name": "h1"}]}))
    tcp = {"h0": {"TCPFastRetrans": fast_retrans, "TCPTimeouts": timeouts,
                  **(dsack or {"TCPDSACKRecv": 0})},
           "h1": {"TCPFastRetrans": 0, "TCPDSACKRecv": 0, "TCPTimeouts": 0}}
    (tmp_path / "drops.json").write_text(json.dumps({"legs": {"together": {
        "start": 99.0, "end": 111.0, "ports": ports or {}, "datapath_lost": 0,
        "softnet_dropped": 0, "hosts": tcp, "jobs": {"a": ["h0", "h1"]}}}}))
    return tmp_path


def test_a_balanced_switch_and_no_resends_are_faithful(tmp_path):
    records, reasons = judge_all(_run(tmp_path, leaf_out=10 * MB))
    assert records["loss"]["judged"] and reasons == []
    assert records["loss"]["measured"]["together"]["switches"]["leaf0"]["in_bytes"] == 10 * MB


def test_bytes_a_switch_swallowed_name_the_switch_and_the_time(tmp_path):
    records, reasons = judge_all(_run(tmp_path, leaf_out=8 * MB))
    (v,) = records["loss"]["violations"]
    assert v["place"] == "leaf0" and v["start_s"] == -1.0 and v["end_s"] == 11.0
    assert reasons[0].startswith("loss invariant: leaf0 took in") and "less" in reasons[0]


def test_queue_drops_explain_a_deficit_and_resends(tmp_path):
    # 20 dropped TSO packets can hold the 1 MB missing and the segments resent
    _records, reasons = judge_all(_run(tmp_path, leaf_out=9 * MB, drops=20,
                                      fast_retrans=20 * SEGMENTS_PER_DROP))
    assert reasons == [], reasons


def test_resends_no_queue_explains_name_the_hosts(tmp_path):
    records, _reasons = judge_all(_run(tmp_path, leaf_out=10 * MB,
                                      fast_retrans=UNEXPLAINED_SEGMENTS + 50))
    (v,) = records["loss"]["violations"]
    assert v["place"].startswith("h0") and "resent 70 segments" in v["sentence"]


@pytest.mark.parametrize(("dsack", "violated"), [
    ({"TCPDSACKRecv": 1, "TCPDSACKRecvSegs": 45}, False),  # one needless 45-segment resend
    ({"TCPDSACKRecv": 1}, True),  # a record without the segment count: blocks only
])
def test_a_needless_resend_of_a_tso_packet_is_counted_in_segments(tmp_path, dsack, violated):
    # the receiver D-SACKs a resent TSO packet in one block: the kernel counts 1 D-SACK and
    # 45 segments, and 45 fast-retransmitted segments less 1 would be 44 unexplained
    _records, reasons = judge_all(_run(tmp_path, leaf_out=10 * MB, fast_retrans=45,
                                       dsack=dsack))
    assert bool(reasons) is violated, reasons


def test_a_port_drop_counter_names_the_port(tmp_path):
    # a flow stalled for a retransmission timeout: the drop was not recovered in a round trip
    records, _ = judge_all(_run(tmp_path, leaf_out=10 * MB, timeouts=1,
                                ports={"leaf0-eth2": {"tx_dropped": 7, "rx_dropped": 0}}))
    (v,) = records["loss"]["violations"]
    assert v["place"] == "leaf0-eth2" and "7 tx_dropped" in v["sentence"]


def test_a_port_drop_recovered_by_fast_retransmit_is_a_note(tmp_path):
    # the demo's rpc run: Open vSwitch counted one tx_dropped, the hosts resent one TSO packet
    ports = {"leaf0-eth3": {"tx_dropped": 1, "kernel_tx_dropped": 1}}
    records, reasons = judge_all(_run(tmp_path, leaf_out=10 * MB, ports=ports,
                                      fast_retrans=SEGMENTS_PER_DROP))
    assert reasons == [] and records["loss"]["violations"] == []
    (note,) = records["loss"]["notes"]
    assert note.startswith("switch port leaf0-eth3 counted 1 kernel_tx_dropped, 1 tx_dropped")
    assert "no timeout" in note
    # twice the segments one dropped packet holds: more was lost than the port counted
    records, reasons = judge_all(_run(tmp_path, leaf_out=10 * MB, ports=ports,
                                      fast_retrans=2 * SEGMENTS_PER_DROP + UNEXPLAINED_SEGMENTS))
    assert {v["place"] for v in records["loss"]["violations"]} == {"leaf0-eth3", "h0,h1"}
    assert records["loss"]["notes"] == []


def test_a_run_without_drop_records_is_not_judged(tmp_path):
    run = _run(tmp_path, leaf_out=10 * MB)
    (run / "drops.json").unlink()
    records, reasons = judge_all(run)
    assert not records["loss"]["judged"] and "drops.json" in records["loss"]["why_not"]
    assert reasons == []


@pytest.fixture
def plugin():
    sys.path.insert(0, str(Path(__file__).parent / "plugins"))
    INVARIANTS.register("queue-depth", "fl_invariant_demo:INVARIANT")
    yield
    INVARIANTS.unregister("queue-depth")
    sys.path.remove(str(Path(__file__).parent / "plugins"))


def test_an_invariant_from_outside_is_one_module_and_one_registration(tmp_path, plugin):
    run = _run(tmp_path, leaf_out=10 * MB)
    q = pd.read_parquet(run / "qdisc_samples.parquet")
    q.loc[q.index[-1], "backlog_bytes"] = 150_000  # leaf0 -> h1 at the last sample
    q.to_parquet(run / "qdisc_samples.parquet")
    records, reasons = judge_all(run)
    assert records["queue-depth"]["judged"]
    assert records["queue-depth"]["measured"] == {"deepest_bytes": 150_000}
    assert reasons == ["queue-depth invariant: leaf0->h1 held 150000 bytes"]
    assert records["queue-depth"]["violations"][0]["start_s"] == 10.0


def test_the_heatmap_names_the_jobs_whose_flows_crossed_each_link():
    from analysis.paths import jobs_on_links

    topology = {"hosts": [{"name": "h0", "leaf": 0}, {"name": "h4", "leaf": 1},
                          {"name": "h1", "leaf": 0}, {"name": "h5", "leaf": 1}]}
    paths = {"legs": {"together": {
        "j0": [{"src": "h0", "dst": "h4", "spine": 3, "bytes": 4_000_000},
               {"src": "h0", "dst": "h4", "spine": 2, "bytes": 14_000}],  # a handshake
        "j1": [{"src": "h1", "dst": "h5", "spine": 3, "bytes": 4_000_000}]}}}
    found = jobs_on_links(paths, topology)
    assert found == {"leaf0→spine3": ["j0", "j1"], "spine3→leaf1": ["j0", "j1"]}
    assert jobs_on_links(None, topology) == {}


SS_OUTPUT = "\n".join([
    "Netid Recv-Q Send-Q Local Address:Port Peer Address:PortProcess",
    'p_raw 0 0 [0]:* * users:(("ovs-vswitchd",pid=7,fd=44)) '
    "skmem:(r0,rb212992,t0,tb67108864,f0,w0,o0,bl0,d0)",
    'p_raw 0 0 *:leaf0-eth1 * users:(("ovs-vswitchd",pid=7,fd=42)) '
    "skmem:(r0,rb212992,t0,tb212992,f0,w0,o176,bl0,d12)",
    'p_raw 0 0 *:leaf0-eth2 * users:(("ovs-vswitchd",pid=7,fd=43)) '
    "skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d0)",
    'p_raw 0 0 *:eth0 * users:(("tcpdump",pid=9,fd=3)) '
    "skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d5)",
])


def test_the_switchs_receiving_sockets_drops_are_read_per_port():
    from testbed.emulator.drop_counters import socket_drops

    assert socket_drops(SS_OUTPUT) == {"leaf0-eth1": 12, "leaf0-eth2": 0}


def test_a_receiving_socket_that_dropped_names_its_port(tmp_path):
    ports = {"leaf0-eth1": {"socket_rx_dropped": 12}}
    records, _ = judge_all(_run(tmp_path, leaf_out=10 * MB, timeouts=1, ports=ports))
    (v,) = records["loss"]["violations"]
    assert v["place"] == "leaf0-eth1" and "12 socket_rx_dropped" in v["sentence"]
