"""High 3 of issue 27: the sweep's Dask cluster runs no other local user's code.

The sweep's LocalCluster speaks TLS with certificates made for it alone, so an unprivileged
user (``setpriv --reuid nobody``) who finds its port can neither connect nor submit; the same
user against a LocalCluster without security (what the sweep used to start) runs code as root,
which shows the test can see the attack. A plaintext remote scheduler needs ``--insecure``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.core.errors import FabricLabError
from testbed.sim.sweep_cluster import dask_client

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="running code as nobody needs root and setpriv")

NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
# What an unprivileged user tries: connect (as written and over plain tcp) and submit code
# that leaves a file behind if it runs.
ATTACK = """
import sys
from distributed import Client
address, marker = sys.argv[1], sys.argv[2]
for a in (address, "tcp://" + address.split("://", 1)[1]):
    try:
        with Client(a, timeout="5s") as c:
            c.submit(lambda: open(marker, "w").close(), pure=False).result(timeout=20)
        print("SUBMITTED", a)
    except Exception as exc:
        print("refused", a, type(exc).__name__)
"""


def attack(address: str, marker: Path) -> str:
    out = subprocess.run([*NOBODY, sys.executable, "-c", ATTACK, address, str(marker)],
                         capture_output=True, text=True, timeout=120, cwd="/")
    return out.stdout + out.stderr


def test_nobody_cannot_submit_to_the_sweeps_local_cluster(tmp_path):
    marker = tmp_path / "drop" / "ran-as-root"
    marker.parent.mkdir()
    with dask_client(workers=1) as client:
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        said = attack(address, marker)
    assert "SUBMITTED" not in said and said.count("refused") == 2, said
    assert not marker.exists()


def test_without_security_nobody_could_run_code_as_root(tmp_path):
    """The control: what the sweep's cluster was before (no security) lets nobody in."""
    from distributed import LocalCluster

    marker = tmp_path / "drop" / "ran-as-root"
    marker.parent.mkdir()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
        said = attack(cluster.scheduler_address, marker)
    assert "SUBMITTED tcp://" in said, said
    assert marker.exists() and marker.stat().st_uid == 0


def test_a_plaintext_scheduler_needs_insecure(tmp_path, capsys):
    with pytest.raises(FabricLabError, match=r"is not tls://.*--insecure"), \
            dask_client(scheduler="tcp://127.0.0.1:9"):
        pass
    (tmp_path / "s.yaml").write_text("base: {leaves: 2, spines: 2, hosts_per_leaf: 2, "
                                     "jobs: 4}\n")
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"),
                 "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--insecure" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
