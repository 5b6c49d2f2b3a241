"""The stock-kernel VM's pure parts: accelerator choice, QEMU's command line, the image
recipe, the check's job script and how its results are read (no root, no VM)."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from testbed.cli.run import chosen
from testbed.core.errors import FabricLabError
from testbed.core.experiment import load_experiments
from testbed.vm import check, image
from testbed.vm.machine import kvm_usable, qemu_command

ROOT = Path(__file__).resolve().parents[1]


def test_kvm_only_with_a_device_and_the_cpu_flag():
    assert kvm_usable("flags\t: fpu vmx sse\n", True)
    assert kvm_usable("flags\t: fpu svm\n", True)
    # a /dev/kvm with neither flag is a software hypervisor a stock kernel stops in
    assert not kvm_usable("flags\t: fpu sse hypervisor\n", True)
    assert not kvm_usable("flags\t: fpu vmx\n", False)


def test_qemu_boots_the_overlay_with_user_networking_and_read_only_shares(tmp_path):
    img = image.Image(tmp_path / "img")
    cmd = qemu_command(img, tmp_path / "o.qcow2", {"job": (tmp_path / "job", False),
                                                  "src": (tmp_path / "src", True)},
                       tmp_path / "console.log", "tcg", 2, 4096)
    line = " ".join(cmd)
    assert "-accel tcg" in line and "-cpu Nehalem" in line
    assert "user,id=net0" in line and "bridge" not in line and "tap" not in line
    assert f"path={tmp_path / 'job'},mount_tag=job,security_model=passthrough,id=job " in \
        line + " "
    assert "mount_tag=src,security_model=passthrough,id=src,readonly=on" in line
    assert "fabriclab.job" in line and str(img.kernel) in line
    kvm = qemu_command(img, tmp_path / "o.qcow2", {}, tmp_path / "c", "kvm", 1, 2048)
    assert kvm[kvm.index("-cpu") + 1] == "host"


@pytest.mark.parametrize("tag,path", [("Bad-Tag", "/x"), ("ok", "/a,b")])
def test_share_tags_and_paths_are_checked(tmp_path, tag, path):
    with pytest.raises(FabricLabError):
        qemu_command(image.Image(tmp_path), tmp_path / "o", {tag: (Path(path), True)},
                     tmp_path / "c", "tcg", 1, 1024)


def test_the_image_holds_what_install_sh_installs():
    have = set(image.packages())
    for name in ("apt.txt", "apt-test.txt"):
        assert set(image.package_list(name)) <= have
    assert {"linux-image-amd64", "openvswitch-switch", "openssh-server"} <= have
    assert "docker.io" in image.package_list("apt.txt")  # comments stripped
    assert not any("#" in p or " " in p for p in have)


def test_the_recipe_key_follows_the_package_list(monkeypatch):
    key = image.recipe_key()
    assert key == image.recipe_key() and len(key) == 12
    monkeypatch.setattr(image, "BOX_PACKAGES", (*image.BOX_PACKAGES, "htop"))
    assert image.recipe_key() != key


def test_configure_writes_the_job_runner_and_masks_docker(tmp_path):
    image.configure(tmp_path)
    unit = tmp_path / "etc/systemd/system/fabriclab-vm-job.service"
    assert "ConditionKernelCommandLine=fabriclab.job" in unit.read_text()
    wants = tmp_path / "etc/systemd/system/multi-user.target.wants/fabriclab-vm-job.service"
    assert wants.is_symlink()
    assert (tmp_path / "usr/local/sbin/fabriclab-vm-job").stat().st_mode & 0o111
    assert str((tmp_path / "etc/systemd/system/docker.service").readlink()) == "/dev/null"
    image.configure(tmp_path)  # again: nothing to trip over


def test_the_job_script_names_the_smoke_set():
    text = check.job_script(("tests/a_root.py", "tests/b_root.py"))
    assert text.startswith("#!/bin/bash\n")
    assert "\nSMOKE_TESTS='tests/a_root.py tests/b_root.py'\n" in text
    assert "install.sh --test" in text
    # one copy of the checkout, defined once and run as the first stage
    assert text.count("copy_checkout() {") == 1 and "stage copy copy_checkout" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    with pytest.raises(ValueError):
        check.job_script(("tests/x.py; rm -rf /",))
    for test in check.SMOKE_TESTS:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), test
        assert not name or f"def {name}(" in (ROOT / path).read_text(), test


def test_smoke_results_from_junit_xml(tmp_path):
    xml = tmp_path / "s.xml"
    xml.write_text("""<testsuites><testsuite>
      <testcase classname="tests.a" name="ok"/>
      <testcase classname="tests.a" name="bad"><failure message="x"/></testcase>
      <testcase classname="tests.b" name="off"><skipped message="no module"/></testcase>
      <testcase classname="tests.b" name="err"><error message="y"/></testcase>
    </testsuite></testsuites>""")
    got = check.smoke_results(xml)
    assert got == {"passed": 1, "failed": ["tests.a::bad", "tests.b::err"], "skipped": 1,
                   "ran": True}
    assert check.smoke_results(tmp_path / "none.xml")["ran"] is False


def test_routing_results_read_the_runs_and_the_headline(tmp_path):
    run = tmp_path / "results" / "20261128-demo-ecmp"
    run.mkdir(parents=True)
    (run / "fidelity.json").write_text(json.dumps({"verdict": "not faithful", "reasons": [
        "this machine is a VM on QEMU's software emulation (TCG)"], "datapath": "kernel"}))
    (run / "env.json").write_text(json.dumps({"datapath": "kernel", "virtualization": "qemu"}))
    (tmp_path / "routing.log").write_text("Routing: vclos vs ecmp on 2 leaves — slowdown\n "
                                          "ratio 2.6× — slowdown ratio 2.62× (ECMP's...)")
    got = check.routing_results(tmp_path)
    assert got["runs"][0]["datapath"] == "kernel"
    assert got["runs"][0]["virtualization"] == "qemu"
    assert got["headline"].startswith("Routing: vclos vs ecmp")


def test_run_variants_and_repeats_choose_the_runs():
    spec = str(ROOT / "experiments" / "demo.yaml")
    exps = load_experiments(spec, shaped=False)
    args = argparse.Namespace(spec=spec, variants="vclos,ecmp", repeats=1)
    got = chosen(exps, "demo", args)
    assert [e.name for e in got] == ["demo-vclos", "demo-ecmp"]
    assert {e.repeats for e in got} == {1}
    assert chosen(exps, "demo", argparse.Namespace(spec=spec, variants=None,
                                                   repeats=None)) == exps
    for bad in (argparse.Namespace(spec=spec, variants="nope", repeats=None),
                argparse.Namespace(spec=spec, variants=",", repeats=None),
                argparse.Namespace(spec=spec, variants=None, repeats=0)):
        with pytest.raises(FabricLabError):
            chosen(exps, "demo", bad)


def test_the_box_trusts_only_the_certificates_debian_lacks():
    from testbed.vm.box import extra_certificates

    a = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----"
    b = "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----"
    assert extra_certificates(f"{a}\n{b}\n", f"{a}\n") == [b]
    assert extra_certificates(f"{a}\n", f"# comment\n{a}\n") == []


def test_the_numerics_check_finds_nothing_wrong_on_a_correct_cpu():
    from testbed.vm import numerics

    assert numerics.wrong_rounds(rounds=5) == dict.fromkeys(numerics.CHECKS, 0)
    assert numerics.main(["--rounds", "2"]) == 0


def test_the_box_pins_the_tcg_cpu_model_and_leaves_kvm_alone():
    from testbed.vm.box import cpu_lines
    from testbed.vm.machine import TCG_CPU_MODEL

    assert f'l.cpu_model = "{TCG_CPU_MODEL}"' in cpu_lines("qemu")
    assert 'l.cpu_mode = "custom"' in cpu_lines("qemu")
    assert cpu_lines("kvm") == ""


def test_the_check_fails_a_guest_that_computes_wrongly():
    good = {"guest_exit_code": 0, "kernel": "6.1.0-50-amd64", "host_kernel": "6.18.44",
            "netem": True, "numerics": True, "datapath": "kernel",
            "smoke": {"ran": True, "failed": [], "passed": 7, "skipped": 0},
            "routing": {"headline": "Routing: vclos vs ecmp ... slowdown ratio 1.9x"}}
    assert check.passed(good)
    for field, bad in (("numerics", False), ("numerics", None), ("kernel", "6.18.44"),
                       ("datapath", "userspace"), ("guest_exit_code", None)):
        assert not check.passed(good | {field: bad}), field
    assert not check.passed(good | {"smoke": {"ran": False, "failed": [], "passed": 0}})
