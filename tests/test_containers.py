"""Container hosts and command jobs, the parts that need no root: specs, the cgroup paths a
process joins, the command that enters a container, the iteration-log convention and the
environment a distributed job gets."""

from __future__ import annotations

import json
import sys

import pytest

from testbed.core.errors import FabricLabError, SpecError
from testbed.core.experiment import expand
from testbed.core.host_runtime import HostRuntime
from testbed.core.jobs import check_against_fabric
from testbed.core.spec import parse_fabric
from testbed.core.topology import build_plan
from testbed.emulator.commands import job_environment, program_argv
from testbed.emulator.confine import Confinement
from testbed.emulator.containers import CONFINE, cgroup_procs_files, enter_command
from workloads.iteration_log import parse, trace_rows

MOUNTINFO_V1 = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
CGROUP_V1 = """\
9:name=systemd:/docker/abc
4:memory:/docker/abc
2:cpu,cpuacct:/docker/abc
0::/docker/abc
"""
LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}


def experiment(**changes):
    base = {"name": "x", "fabric": LEAF_SPINE,
            "jobs": [{"name": "j", "hosts": ["h0", "h2"],
                      "workload": {"kind": "command", "argv": ["python", "-V"]}}]}
    base.update(changes)
    return expand(base)[0]


def test_cgroup_files_of_a_v1_hybrid_machine():
    assert cgroup_procs_files(CGROUP_V1, MOUNTINFO_V1) == [
        "/sys/fs/cgroup/systemd/docker/abc/cgroup.procs",
        "/sys/fs/cgroup/memory/docker/abc/cgroup.procs",
        "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cgroup.procs",
        "/sys/fs/cgroup/unified/docker/abc/cgroup.procs",
    ]


def test_cgroup_files_seen_from_inside_a_container_strip_the_mount_root():
    mountinfo = "50 40 0:38 /docker/outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert cgroup_procs_files("0::/docker/outer/inner\n", mountinfo) == [
        "/sys/fs/cgroup/inner/cgroup.procs"]


def test_entering_a_container_passes_paths_and_its_confinement_as_arguments():
    confinement = Confinement(caps=0xA80425FB, filters=(b"\x06\x00\x00\x00\x00\x00\xff\x7f",))
    argv = enter_command(4242, ["/sys/fs/cgroup/x y/cgroup.procs"], confinement,
                         ["python3", "-c", "1"])
    assert argv[:3] == [sys.executable, "-I", str(CONFINE)]  # no PYTHON* of the image's
    assert argv[3:7] == ["--target", "4242", "--caps", "a80425fb"]
    assert argv[7:9] == ["--seccomp", "060000000000ff7f"]
    assert argv[9:11] == ["--cgroup", "/sys/fs/cgroup/x y/cgroup.procs"]
    assert argv[-4:] == ["--", "python3", "-c", "1"]


def test_host_runtime_defaults_and_mistakes():
    assert not HostRuntime().is_container
    assert HostRuntime(runtime="docker").image == "fabriclab/worker"
    with pytest.raises(ValueError, match="cpus applies to runtime: docker only"):
        HostRuntime(cpus=1)
    with pytest.raises(ValueError, match="mem_limit"):
        HostRuntime(runtime="docker", mem_limit="lots")
    with pytest.raises(ValueError, match="image"):
        HostRuntime(runtime="docker", image="Bad Image;rm")


def test_an_experiment_says_which_hosts_are_containers():
    exp = experiment(hosts={"runtime": "docker", "cpus": 1})
    runtimes = exp.host_runtimes(["h0", "h1"])
    assert all(rt.is_container and rt.cpus == 1 for rt in runtimes.values())
    job = {"name": "j", "hosts": ["h1"], "host_runtime": {"runtime": "docker"},
           "workload": {"kind": "command", "argv": ["true"]}}
    mixed = experiment(jobs=[job]).host_runtimes(["h0", "h1"])
    assert not mixed["h0"].is_container and mixed["h1"].is_container


def test_a_job_runtime_needs_listed_hosts_in_one_sentence():
    job = {"name": "j", "hosts_wanted": 2, "host_runtime": {"runtime": "docker"},
           "workload": {"kind": "command", "argv": ["true"]}}
    with pytest.raises(SpecError, match="host_runtime needs the job's hosts listed") as err:
        experiment(jobs=[job])
    assert "\n" not in str(err.value)


def test_command_workload_mistakes_name_the_field():
    job = {"name": "j", "hosts": ["h0"], "workload": {"kind": "command", "argv": []}}
    with pytest.raises(SpecError, match="argv"):
        experiment(jobs=[job])
    job["workload"] = {"kind": "command", "argv": ["x"], "env": {"1BAD": "v"}}
    with pytest.raises(SpecError, match="env"):
        experiment(jobs=[job])


def test_command_jobs_need_one_interface_per_host():
    exp = experiment(fabric={"kind": "multidim", "dims": [{"size": 2, "mbit_s": 10}]},
                     jobs=[{"name": "j", "hosts": ["h0", "h1"],
                            "workload": {"kind": "command", "argv": ["true"]}}])
    with pytest.raises(SpecError, match="one fabric interface per host"):
        check_against_fabric(exp, build_plan(exp.fabric))


def test_the_environment_of_a_distributed_job(tmp_path):
    plan = build_plan(parse_fabric({"fabric": LEAF_SPINE}))
    env = job_environment(plan, ["h2", "h0"], 1, master_port=29511, job_dir=tmp_path,
                          run_id="r", job_id="j")
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "2" and env["LOCAL_RANK"] == "0"
    assert env["MASTER_ADDR"] == plan.node("h2").nics[0].ip and env["MASTER_PORT"] == "29511"
    assert env["GLOO_SOCKET_IFNAME"] == plan.node("h0").nics[0].intf
    assert env["FABRICLAB_JOB_DIR"] == str(tmp_path.resolve())
    multidim = build_plan(parse_fabric({"fabric": {"kind": "multidim",
                                                   "dims": [{"size": 2, "mbit_s": 10}]}}))
    with pytest.raises(FabricLabError, match="one fabric interface per host"):
        job_environment(multidim, ["h0", "h1"], 0, master_port=1, job_dir=tmp_path,
                        run_id="r", job_id="j")


def test_python_means_the_python_that_has_fabriclab():
    import sys

    assert program_argv(["python", "-m", "x"]) == [sys.executable, "-m", "x"]
    assert program_argv(["python3", "x.py"]) == ["python3", "x.py"]


def test_iteration_lines_are_parsed_and_everything_else_is_left_alone():
    lines = [
        json.dumps({"fabriclab": "iteration", "iteration": 0, "time_s": 0.5, "warmup": True}),
        "loss 0.3 {\"iteration\": 1}",
        json.dumps({"fabriclab": "iteration", "iteration": 1, "time_s": 0.25, "bytes": 64}),
        json.dumps({"fabriclab": "iteration", "iteration": 2, "time_s": -1}),
        json.dumps({"fabriclab": "iteration", "iteration": "3", "time_s": 1}),
        json.dumps({"iteration": 4, "time_s": 1}),
        '{"fabriclab": "iteration", "iteration": 5, "time_s": ',
    ]
    rows = parse("\n".join(lines))
    assert rows == [{"iteration": 0, "time_s": 0.5, "warmup": True, "bytes": None},
                    {"iteration": 1, "time_s": 0.25, "warmup": False, "bytes": 64}]
    trace = trace_rows(rows, run_id="r", job_id="j", rank=1, world=2, label="train.py")
    assert [r["time"] for r in trace] == [0.5, 0.25]
    assert trace[0]["compute"] is None and trace[1]["algorithm"] == "command"


def test_peer_of_must_name_an_allreduce_job():
    fab = {"name": "f", "hosts": ["h0", "h1"], "workload": {"kind": "allreduce",
                                                            "sizes": ["1MiB"]}}
    peer = {"name": "g", "hosts": ["h2", "h3"],
            "workload": {"kind": "command", "argv": ["true"], "peer_of": "f"}}
    assert experiment(jobs=[fab, peer]).jobs[1].workload.peer_of == "f"
    peer["workload"]["peer_of"] = "nobody"
    with pytest.raises(SpecError, match="peer_of 'nobody' must name an allreduce job"):
        experiment(jobs=[fab, peer])


def test_a_changed_checkout_rebuilds_only_the_worker_layer(monkeypatch):
    from testbed.emulator import images

    present = {images.BASE_IMAGE, images.runtime_tag("fabriclab/worker")}
    built = []
    monkeypatch.setattr(images, "exists", lambda _client, tag: tag in present)
    monkeypatch.setattr(images, "_build_worker",
                        lambda _c, name, runtime, tag, _say: built.append((name, runtime, tag)))
    monkeypatch.setattr(images, "_prune", lambda *a, **k: None)
    tag = images.ensure_worker(None, "fabriclab/worker", say=lambda _l: None)
    assert tag == images.resolve("fabriclab/worker")
    assert built == [("fabriclab/worker", images.runtime_tag("fabriclab/worker"), tag)]
    with pytest.raises(FabricLabError, match="fabriclab images --torch"):
        images.ensure_worker(None, "fabriclab/worker-torch", say=lambda _l: None)
    assert images.ensure_worker(None, "debian:12") == "debian:12"  # other images: as given


def test_apparmor_is_reported_in_one_line_present_disabled_or_absent(tmp_path):
    from testbed.emulator.preflight import apparmor_check

    absent = apparmor_check(tmp_path / "none")
    assert not absent.ok and not absent.required
    assert absent.detail == "this kernel has no AppArmor: containers get no AppArmor profile"
    (tmp_path / "aa" / "parameters").mkdir(parents=True)
    (tmp_path / "aa" / "parameters" / "enabled").write_text("N\n")
    assert "disabled" in apparmor_check(tmp_path / "aa").detail
    (tmp_path / "aa" / "parameters" / "enabled").write_text("Y\n")
    on = apparmor_check(tmp_path / "aa")
    assert on.ok and "docker-default" in on.detail
