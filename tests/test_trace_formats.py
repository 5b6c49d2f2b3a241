"""Acme, Alibaba PAI 2020 and Alibaba Lingjun 2023 traces: the readers on project-made samples
(tests/data/traces/, the real column layouts, invented rows), their bad rows, and Lingjun's
recorded placement replayed by the cluster simulator (--placement trace)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused
from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.sim.cluster import ClusterConfig, simulate_cluster, trace_hosts
from testbed.sim.sweep_spec import ClusterParams
from testbed.sim.trace_formats import TracePlacement, read_acme, read_lingjun, read_pai
from testbed.sim.trace_loading import load_trace, load_trace_placement, trace_identity

TRACES = Path(__file__).parent / "data" / "traces"
SEREN = TRACES / "acme" / "trace_seren.csv"
KALOS = TRACES / "acme" / "trace_kalos.csv"
PAI = TRACES / "pai"
LINGJUN = TRACES / "lingjun"


def _summary(jobs: list) -> list[tuple[str, float, int]]:
    return [(j.job_id, j.arrival, j.gpus) for j in jobs]


# ------------------------------------------------------------------------- happy paths


def test_acme_seren_reads_gpu_jobs_with_their_time_zones() -> None:
    jobs = read_acme(SEREN, seed=3)
    # 9000102 (no GPU) and 9000104 (cancelled: no duration) are skipped; 9000105 was
    # submitted at 00:30 UTC, i.e. 08:30 +08:00, half an hour after the first job.
    assert _summary(jobs) == [("9000101", 0.0, 8), ("9000103", 120.0, 16),
                              ("9000106", 240.0, 4), ("9000105", 1800.0, 32)]
    assert jobs == read_acme(SEREN, seed=3)
    # The duration (seconds, fractional ones too) is the isolated run time.
    assert jobs[0].isolated_time(100e9) == pytest.approx(3600, rel=1e-3)
    assert jobs[2].isolated_time(100e9) == pytest.approx(120.5, rel=1e-2)


def test_acme_kalos_layout_reads_too() -> None:
    jobs = read_acme(KALOS)
    assert _summary(jobs) == [("dlcexample0001", 0.0, 64), ("dlcexample0003", 1200.0, 16)]
    assert jobs[0].isolated_time(100e9) == pytest.approx(600, rel=1e-2)


def test_pai_directory_gpus_from_plan_gpu_and_instances() -> None:
    jobs = read_pai(PAI)
    # 0001: 4 instances x 100% (its ps task asks for no GPU); 0002: one instance at 50% takes
    # a whole GPU; 0003: 2 x 200%; 0004 never ran, 0005 used no GPU; 0006 is missing from the
    # job table, so its first task start is its arrival. Arrivals: job-table submissions.
    assert _summary(jobs) == [("jobaaaa0001", 0.0, 4), ("jobaaaa0002", 100.0, 1),
                              ("jobaaaa0003", 200.0, 4), ("jobaaaa0006", 600.0, 1)]
    # Run time: first task start (the ps, 1005) to last task end (4995).
    assert jobs[0].isolated_time(100e9) == pytest.approx(3990, rel=1e-3)


def test_pai_task_table_alone_arrives_at_first_task_start() -> None:
    jobs = read_pai(PAI / "pai_task_table.csv")
    assert _summary(jobs) == [("jobaaaa0001", 0.0, 4), ("jobaaaa0002", 145.0, 1),
                              ("jobaaaa0003", 245.0, 4), ("jobaaaa0006", 595.0, 1)]


def test_lingjun_jobs_and_placement() -> None:
    trace = read_lingjun(LINGJUN)
    # ccc never ran, eee has no GPU worker, zzz is not in job.csv; bbb's dates are in the
    # slash form and it ends at gmt_job_stopped; ddd ran on a host topo.csv does not list.
    assert _summary(trace.jobs) == [("dlcjobaaa", 0.0, 24), ("dlcjobbbb", 300.0, 8),
                                    ("dlcjobddd", 1200.0, 8)]
    assert trace.jobs[1].isolated_time(100e9) == pytest.approx(1800, rel=1e-2)
    # bbb's worker-1 was rescheduled from h01 to h05: the later row replaces the earlier one.
    assert trace.placement.gpus_of == {"dlcjobaaa": {"h01": 8, "h02": 8, "h03": 8},
                                       "dlcjobbbb": {"h04": 4, "h05": 4}}
    assert trace.placement.switches["h03"].asw == "S10"
    assert trace.placement.switches["h03"].psw == "P2"
    # ASWs in natural order (S2, S3, S10) are leaves 0, 1, 2; hosts take 8-slot blocks.
    assert trace.placement.fabric_slots(3, 16) == {
        "h01": (0, 0), "h02": (0, 8), "h05": (1, 0), "h03": (2, 0), "h04": (2, 8)}


def test_load_trace_selects_the_new_forms() -> None:
    assert _summary(load_trace(f"acme:{SEREN}", 2, 0.5, 64, 3)) == _summary(
        read_acme(SEREN, seed=3))[:2]
    assert len(load_trace(f"pai:{PAI}", 10, 0.5, 64, 1)) == 4
    jobs, placement = load_trace_placement(f"lingjun:{LINGJUN}", 1, 0.5, 64, 1)
    assert _summary(jobs) == [("dlcjobaaa", 0.0, 24)] and placement is not None
    assert load_trace_placement(f"acme:{SEREN}", 5, 0.5, 64, 1)[1] is None
    with pytest.raises(FabricLabError, match="acme:FILE, pai:DIR-or-FILE or lingjun:DIR"):
        load_trace("lingjun", 5, 0.5, 64, 1)
    assert ClusterParams(trace=f"lingjun:{LINGJUN}", placement="trace").placement == "trace"


def test_directory_trace_digest_covers_every_file_read(tmp_path: Path) -> None:
    copy = tmp_path / "lingjun"
    shutil.copytree(LINGJUN, copy)
    before = trace_identity(f"lingjun:{copy}", 0.8)
    assert before["trace_file"] == str(copy.resolve()) and before["load"] is None
    with (copy / "topo.csv").open("a") as fh:
        fh.write("h06,G1,P1,S3\n")
    assert trace_identity(f"lingjun:{copy}", 0.8)["trace_sha256"] != before["trace_sha256"]
    assert trace_identity(f"pai:{PAI / 'pai_task_table.csv'}", 0.8)["trace_sha256"] != (
        trace_identity(f"pai:{PAI}", 0.8)["trace_sha256"])


# ------------------------------------------------------------------------- bad rows


def _broken(tmp_path: Path, source: Path, line: int, text: str) -> Path:
    """A copy of ``source`` (a file, or the file of a copied directory) with ``line``
    (1-based) replaced by ``text``."""
    out = tmp_path / source.name
    lines = source.read_text().splitlines()
    lines[line - 1] = text
    out.write_text("\n".join(lines) + "\n")
    return out


def _pai_dir(tmp_path: Path) -> Path:
    shutil.copytree(PAI, tmp_path / "pai")
    return tmp_path / "pai"


def _lingjun_dir(tmp_path: Path) -> Path:
    shutil.copytree(LINGJUN, tmp_path / "lingjun")
    return tmp_path / "lingjun"


SEREN_ROW = ("9000107,u0a6,1,{gpus},8,Other,COMPLETED,{submit},2023-03-01 08:00:30+08:00,"
             "2023-03-01 09:00:30+08:00,{duration},30,1.0")


@pytest.mark.parametrize(("row", "message"), [
    (SEREN_ROW.format(gpus="x", submit="2023-03-01 08:00:00+08:00", duration="60"),
     "trace_seren.csv line 7: gpu_num 'x' is not a number"),
    (SEREN_ROW.format(gpus="1.5", submit="2023-03-01 08:00:00+08:00", duration="60"),
     "trace_seren.csv line 7: gpu_num '1.5' is not a whole number"),
    (SEREN_ROW.format(gpus="8", submit="yesterday", duration="60"),
     "trace_seren.csv line 7: submit_time 'yesterday' is neither seconds nor a date"),
    (SEREN_ROW.format(gpus="8", submit="2023-03-01 08:00:00+08:00", duration="-5"),
     "trace_seren.csv line 7: duration '-5' is not a number of 0 or more"),
    ("9000107,u0a6,1,8", "trace_seren.csv line 7: 4 fields where an Acme job trace"),
])
def test_acme_bad_row_is_one_sentence_with_its_line(tmp_path: Path, row: str,
                                                    message: str) -> None:
    with pytest.raises(FabricLabError) as info:
        read_acme(_broken(tmp_path, SEREN, 7, row))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_acme_without_its_columns_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "cluster_log.csv"
    other.write_text("job_id,gpus,submit,duration\n1,8,0,60\n")
    with pytest.raises(FabricLabError, match=r"is not an Acme job trace .* no column gpu_num"):
        read_acme(other)


@pytest.mark.parametrize(("table", "line", "row", "message"), [
    ("pai_task_table.csv", 3, "jobaaaa0002,tensorflow,1.0,Terminated,1150.0,1950.0,400.0,10.0,"
     "half,T4", "pai_task_table.csv line 3: plan_gpu 'half' is not a number"),
    ("pai_task_table.csv", 1, "jobaaaa0001,worker,,Terminated,1010.0,4990.0,600.0,29.3,100.0,"
     "V100", "pai_task_table.csv line 1: inst_num is empty"),
    ("pai_task_table.csv", 4, "jobaaaa0003,worker,2.0,Failed,soon,1290.0,400.0,10.0,200.0",
     "pai_task_table.csv line 4: 9 fields where a PAI task table has 10"),
    ("pai_task_table.csv", 4, "jobaaaa0003,worker,2.0,Failed,soon,1290.0,400.0,10.0,200.0,P100",
     "pai_task_table.csv line 4: start_time 'soon' is neither seconds nor a date"),
    ("pai_job_table.csv", 2, "jobaaaa0002,instaaaa0002,usr002,Terminated,x,2000.0",
     "pai_job_table.csv line 2: start_time 'x' is neither seconds nor a date"),
])
def test_pai_bad_row_is_one_sentence_with_its_line(tmp_path: Path, table: str, line: int,
                                                   row: str, message: str) -> None:
    directory = _pai_dir(tmp_path)
    _broken(directory, directory / table, line, row)
    with pytest.raises(FabricLabError) as info:
        read_pai(directory)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_pai_directory_without_its_tables_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FabricLabError, match=r"cannot read trace .*pai_job_table.csv: No such"):
        read_pai(tmp_path)


@pytest.mark.parametrize(("name", "line", "row", "message"), [
    ("worker.csv", 6, '5,dlcjobbbb,dlcjobbbb-worker-1,worker,h01,{"nvidia.com/gpu": "4", "cpu": 1}',
     "worker.csv line 6: 7 fields where a Lingjun worker.csv has 6"),
    ("worker.csv", 6, '5,dlcjobbbb,dlcjobbbb-worker-1,worker,h01,"{""nvidia.com/gpu"": 4"',
     "worker.csv line 6: RES '{\"nvidia.com/gpu\": 4' is not JSON"),
    ("worker.csv", 6, '5,dlcjobbbb,dlcjobbbb-worker-1,worker,h01,"{""nvidia.com/gpu"": ""a""}"',
     "worker.csv line 6: RES nvidia.com/gpu 'a' is not a whole number"),
    ("worker.csv", 7, '6,dlcjobbbb,dlcjobbbb-worker-1,worker,h04,"{""nvidia.com/gpu"": ""8""}"',
     "worker.csv line 7: job dlcjobbbb holds 12 GPUs on host h04, which has 8"),
    ("job.csv", 3, "2,dlcjobbbb,PyTorchJob,bert,Failed,2023/8/1 10:05,2023/8/1 25:06,,",
     "job.csv line 3: gmt_job_running '2023/8/1 25:06' is neither seconds nor a date"),
    ("job.csv", 2, "1,dlcjobaaa,PyTorchJob,gpt,Succeeded,,2023-08-01 10:01:00,,",
     "job.csv line 2: gmt_job_submitted is empty"),
    ("topo.csv", 6, "h01,G1,P1,S3", "topo.csv line 6: host h01 is listed twice"),
])
def test_lingjun_bad_row_is_one_sentence_with_its_line(tmp_path: Path, name: str, line: int,
                                                       row: str, message: str) -> None:
    directory = _lingjun_dir(tmp_path)
    _broken(directory, directory / name, line, row)
    with pytest.raises(FabricLabError) as info:
        read_lingjun(directory)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_files_are_one_sentence(tmp_path: Path) -> None:
    binary = tmp_path / "trace.csv"
    binary.write_bytes(b"job_id,gpu_num,submit_time,duration\n\xff\xfe,1,0,1\n")
    calls: list[Callable[[], object]] = [
        lambda: read_acme(binary),
        lambda: read_acme(tmp_path / "missing.csv"),
        lambda: read_lingjun(tmp_path),
        lambda: read_pai(tmp_path / "missing.csv"),
    ]
    for call in calls:
        with pytest.raises(FabricLabError) as info:
            call()
        assert "\n" not in str(info.value)


def test_a_trace_without_gpu_jobs_says_so(tmp_path: Path) -> None:
    cpu_only = tmp_path / "trace_seren.csv"
    lines = SEREN.read_text().splitlines()
    cpu_only.write_text("\n".join([lines[0], lines[2]]) + "\n")
    with pytest.raises(FabricLabError, match="holds no usable job"):
        read_acme(cpu_only)


# ------------------------------------------------------------------------- trace placement


def test_trace_hosts_take_free_slots_of_each_hosts_block() -> None:
    cluster = Cluster(3, 4, 16)
    slots = read_lingjun(LINGJUN).placement.fabric_slots(3, 16)
    cluster.claim("other", [(2, 8), (2, 9)], "ecmp")  # two GPUs of h04 are busy
    hosts = trace_hosts(cluster.free_slots, slots, {"h04": 4, "h05": 4}, 8)
    assert hosts == [(2, 10), (2, 11), (2, 12), (2, 13), (1, 0), (1, 1), (1, 2), (1, 3)]
    with pytest.raises(AllocationRefused, match="trace host h04 has 6 free GPUs"):
        trace_hosts(cluster.free_slots, slots, {"h04": 7}, 8)


def test_fabric_too_small_for_the_trace_is_one_sentence() -> None:
    placement = read_lingjun(LINGJUN).placement
    with pytest.raises(FabricLabError) as info:
        placement.fabric_slots(2, 16)
    assert str(info.value).startswith("--placement trace cannot map the trace onto this "
                                      "fabric: its topo.csv has 3 leaf switches (ASW)")
    assert "--leaves 3 --hosts-per-leaf 16" in str(info.value)


def test_simulation_places_jobs_where_the_trace_ran() -> None:
    trace = read_lingjun(LINGJUN)
    config = ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16, policy="ecmp",
                           placement="trace")
    result = simulate_cluster(trace.jobs, config, placement=trace.placement)
    rows = {r["job_id"]: r for r in result.rows}
    # aaa spans leaves 0 (h01, h02) and 2 (h03); bbb leaves 2 (h04) and 1 (h05), free at
    # once; ddd has no recorded hosts and the allocator puts it on one leaf.
    assert (rows["dlcjobaaa"]["leaves"], rows["dlcjobbbb"]["leaves"]) == (2, 2)
    assert rows["dlcjobddd"]["leaves"] == 1
    assert all(r["wait_s"] == 0 for r in result.rows)
    assert (result.summary["placement"], result.summary["jobs_trace_placed"]) == ("trace", 2)
    # Under the allocator, aaa (24 GPUs) would fill leaves 0 and 1 instead.
    joint = simulate_cluster(trace.jobs, ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16,
                                                       policy="ecmp"))
    assert joint.summary["jobs_trace_placed"] == 0 and joint.summary["placement"] == ""


def test_trace_placement_waits_for_busy_trace_hosts() -> None:
    trace = read_lingjun(LINGJUN)
    late = {**trace.placement.gpus_of, "dlcjobbbb": {"h01": 4, "h05": 4}}  # h01: aaa's
    placement = TracePlacement(late, trace.placement.switches)
    config = ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16, policy="ecmp",
                           placement="trace")
    rows = {r["job_id"]: r for r in simulate_cluster(trace.jobs, config,
                                                     placement=placement).rows}
    assert rows["dlcjobbbb"]["start_s"] == pytest.approx(rows["dlcjobaaa"]["finish_s"])


def test_vclos_refuses_a_trace_placement_of_no_rectangle_shape() -> None:
    trace = read_lingjun(LINGJUN)
    config = ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16, policy="vclos",
                           placement="trace")
    result = simulate_cluster(trace.jobs, config, placement=trace.placement)
    # aaa holds 16 GPUs on one leaf and 8 on another: no m x n shape for vClos.
    assert [r["job_id"] for r in result.rows] == ["dlcjobbbb", "dlcjobddd"]
    assert result.summary["refused_unshapeable"] == 1


def test_trace_placement_needs_a_trace_that_records_it_and_no_ocs() -> None:
    jobs = read_acme(SEREN)
    config = ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16, policy="ecmp",
                           placement="trace")
    with pytest.raises(FabricLabError, match="needs a trace that records where its jobs ran"):
        simulate_cluster(jobs, config)
    with pytest.raises(FabricLabError, match="--policy ocs-vclos wires circuits only"):
        ClusterConfig(leaves=3, spines=4, hosts_per_leaf=16, policy="ocs-vclos",
                      ocs_count=4, placement="trace").check()


def test_cli_runs_the_new_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = ["simulate-cluster", "--leaves", "3", "--spines", "4", "--hosts-per-leaf", "16"]
    for trace, completed in ((f"acme:{SEREN}", 4), (f"pai:{PAI}", 4),
                             (f"lingjun:{LINGJUN}", 3)):
        out = tmp_path / trace.partition(":")[0]
        assert main([*small, "--trace", trace, "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["trace"], summary["jobs_completed"]) == (trace, completed)
    out = tmp_path / "placed"
    assert main([*small, "--trace", f"lingjun:{LINGJUN}", "--placement", "trace",
                 "--policy", "vclos", "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["jobs_trace_placed"] == 1
    assert main([*small, "--trace", f"acme:{SEREN}", "--placement", "trace",
                 "--out", str(tmp_path / "x")]) != 0
    assert "--placement trace needs a trace that records" in capsys.readouterr().err
