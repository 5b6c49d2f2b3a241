"""ASTRA-sim files read and written (no root): spec -> ASTRA-sim -> spec and ASTRA-sim -> spec
-> ASTRA-sim give back what went in, on small samples written here; units convert (GB/s <->
Mbit/s); bad input is one sentence naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.core import astra_formats as af
from testbed.core.errors import SpecError
from testbed.core.experiment import expand
from testbed.core.presets import PRESETS
from testbed.core.spec import parse_fabric

SPEC = {
    "name": "small",
    "fabric": {"kind": "multidim", "dims": [
        {"size": 2, "mbit_s": 400000.0, "kind": "ring"},
        {"size": 4, "mbit_s": 240000.0, "kind": "fully_connected"},
        {"size": 2, "mbit_s": 80000.0, "kind": "switch"}]},
    "rate_scale": 0.00025,
    "policy": "shortest",
    "jobs": [{"name": "allreduce", "hosts_wanted": 16, "algorithm": "themis", "order": "scf",
              "chunks": 8, "dim_algorithm": "ring",
              "workload": {"kind": "allreduce", "sizes": ["1MiB"]}}],
}
NETWORK_YAML = """topology: [ Ring, FullyConnected, Switch ]
npus_count: [ 4, 4, 2 ]
bandwidth: [ 50.0, 10.0, 25.0 ]
latency: [ 0.0, 0.0, 0.0 ]
"""
NETWORK_JSON = """{"topologies-per-dim": ["Ring", "FullyConnected", "Switch"],
 "dimensions-count": 3, "units-count": [4, 4, 2], "links-count": [2, 3, 1],
 "link-bandwidth": [25.0, 10.0, 25.0], "link-latency": [0, 0, 0]}
"""
SYSTEM = """scheduling-policy: LIFO
active-chunks-per-dimension: 1
preferred-dataset-splits: 16
all-reduce-implementation: ring_ring_ring
collective-optimization: localBWAware
intra-dimension-scheduling: smallestFirst
inter-dimension-scheduling: offlineGreedy
"""


def _spec_round_trip(spec: dict) -> dict:
    run = expand(spec)[0]
    dims, system = af.from_spec(run.fabric, run.jobs[0])
    back_dims = af.parse_network_yaml(af.network_yaml(dims))
    back_system = af.parse_system(af.system_text(system, len(dims)), n_dims=len(dims))
    out, _notes = af.to_spec(back_dims, back_system, spec["name"], ["1MiB"])
    return out


def test_spec_to_astra_to_spec_gives_the_spec_back() -> None:
    out = _spec_round_trip(SPEC)
    assert out["fabric"] == SPEC["fabric"]
    job, want = out["jobs"][0], SPEC["jobs"][0]
    assert {k: job[k] for k in want} == want
    assert expand(out)[0].fabric == expand(SPEC)[0].fabric


def test_network_json_round_trips_the_same_dimensions() -> None:
    dims = af.parse_network_json(NETWORK_JSON)
    assert af.parse_network_json(af.network_json(dims)) == dims
    assert af.parse_network_yaml(af.network_yaml(dims)) == dims


def test_astra_to_spec_to_astra_gives_the_files_back(tmp_path: Path) -> None:
    (tmp_path / "net.yml").write_text(NETWORK_YAML)
    (tmp_path / "sys.txt").write_text(SYSTEM)
    spec = tmp_path / "spec.yaml"
    assert main(["import-astra", str(tmp_path / "net.yml"), "--system",
                 str(tmp_path / "sys.txt"), "--out", str(spec)]) == 0
    assert main(["export-astra", str(spec), "--out", str(tmp_path / "back")]) == 0
    assert (af.parse_network_yaml((tmp_path / "back" / "network.yml").read_text())
            == af.parse_network_yaml(NETWORK_YAML))
    assert (af.parse_system((tmp_path / "back" / "system.txt").read_text())
            == af.parse_system(SYSTEM))
    # the 1.0 JSON written beside it describes the same network as the 2.0 YAML
    assert (af.parse_network_json((tmp_path / "back" / "network.json").read_text())
            == af.parse_network_yaml(NETWORK_YAML))


def test_units_ghbyte_s_to_mbit_s_and_fc_split() -> None:
    dims = af.parse_network_yaml(NETWORK_YAML)
    # a ring or switch link's GB/s is the host's bandwidth; a mesh NPU has n-1 links; a GB/s
    # is 2**30 bytes/s (testbed.core.astra_units): 50, 30 and 25 GB/s
    assert [d.mbit_s for d in dims] == [429496.7296, 257698.03776, 214748.3648]
    assert af.parse_network_json(NETWORK_JSON) == dims  # 2 x 25 GB/s ring, 3 x 10 GB/s mesh
    fabric = parse_fabric({"fabric": af.to_spec(dims, None, "x")[0]["fabric"],
                           "rate_scale": 0.0001})
    assert fabric.dims[1].link_mbit_s == 85899.34592


def test_import_without_system_writes_a_fabric_file(tmp_path: Path) -> None:
    (tmp_path / "net.yml").write_text(NETWORK_YAML)
    out = tmp_path / "fabric.yaml"
    assert main(["import-astra", str(tmp_path / "net.yml"), "--out", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert set(data) == {"fabric", "rate_scale"}
    assert data["rate_scale"] == 0.000232830643654  # 50 GB/s (429 497 Mbit/s) emulated at 100


def test_system_json_of_astra_2_reads_like_the_text() -> None:
    text = ('{"scheduling-policy": "LIFO", "preferred-dataset-splits": 16, '
            '"all-reduce-implementation": ["ring", "ring", "ring"], '
            '"intra-dimension-scheduling": "SCF", "inter-dimension-scheduling": "themis"}')
    assert af.parse_system(text) == af.parse_system(SYSTEM)


def test_preset_export_keeps_its_collective_per_dimension(tmp_path: Path) -> None:
    assert main(["export-astra", "--preset", "4d-ring-fc-ring-switch", "--out",
                 str(tmp_path)]) == 0
    system = af.parse_system((tmp_path / "system.txt").read_text())
    assert system.dim_algorithms == PRESETS["4d-ring-fc-ring-switch"].dim_algorithms
    dims = af.parse_network_json((tmp_path / "network.json").read_text())
    assert [d.gbyte_s for d in dims] == [375.0, 175.0, 150.0, 100.0]


def test_a_large_network_is_refused_unless_scaled_down(tmp_path: Path, capsys) -> None:
    net = tmp_path / "big.yml"
    net.write_text("topology: [Switch, Switch]\nnpus_count: [16, 64]\nbandwidth: [150, 100]\n")
    assert main(["import-astra", str(net)]) == 2
    assert "1024 NPUs is more than this machine emulates" in capsys.readouterr().err
    assert main(["import-astra", str(net), "--scale-down", "--out",
                 str(tmp_path / "s.yaml")]) == 0
    data = yaml.safe_load((tmp_path / "s.yaml").read_text())
    assert [d["size"] for d in data["fabric"]["dims"]] == [4, 4]


@pytest.mark.parametrize(("name", "text", "words"), [
    ("n.yml", "topology: [Ring, Torus]\nnpus_count: [2, 2]\nbandwidth: [1, 1]\n",
     "n.yml: topology: 'Torus' is not a topology fabriclab builds"),
    ("n.yml", "topology: [Ring]\nnpus_count: [2, 2]\nbandwidth: [1]\n",
     "n.yml: npus_count: has 2 values for 1 dimensions"),
    ("n.yml", "topology: [Ring]\nnpus_count: [2]\nbandwidth: [-1]\n",
     "n.yml: bandwidth: -1 is not one of the positive numbers"),
    ("n.yml", "topology: [Ring]\nnpus_count: [2]\n", "n.yml: bandwidth: missing"),
    ("n.yml", "topology: [Ring\n", "n.yml is not valid ASTRA-sim network YAML"),
    ("n.json", '{"topologies-per-dim": ["Ring"], "units-count": [2.5], "links-count": [1], '
     '"link-bandwidth": [1]}', "n.json: units-count: 2.5 is not one of the positive whole"),
])
def test_bad_network_file_is_one_sentence(tmp_path: Path, capsys, name: str, text: str,
                                          words: str) -> None:
    (tmp_path / name).write_text(text)
    assert main(["import-astra", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


@pytest.mark.parametrize(("text", "words"), [
    (SYSTEM.replace("active-chunks-per-dimension: 1", "active-chunks-per-dimension: 4"),
     "s.txt: active-chunks-per-dimension: 4: fabriclab runs one chunk per dimension"),
    (SYSTEM.replace("smallestFirst", "RG"), "s.txt: intra-dimension-scheduling: 'RG' has no"),
    (SYSTEM.replace("offlineGreedy", "roundRobin"), "s.txt: inter-dimension-scheduling: 'rou"),
    (SYSTEM.replace("ring_ring_ring", "ring_ring"),
     "s.txt: all-reduce-implementation: names 2 collectives for 3 network dimensions"),
    (SYSTEM.replace("ring_ring_ring", "ring_doubleBinaryTree_ring"),
     "s.txt: all-reduce-implementation: 'doubleBinaryTree' has no fabriclab collective"),
    (SYSTEM + "mystery-key: 3\n", "s.txt: mystery-key: is not an ASTRA-sim system key"),
    (SYSTEM + "dangling:\n", "s.txt: dangling: has no value"),
    (SYSTEM.replace("localBWAware", "baseline"), "s.txt: collective-optimization: 'baseline'"),
])
def test_bad_system_file_is_one_sentence(tmp_path: Path, capsys, text: str, words: str) -> None:
    (tmp_path / "n.yml").write_text(NETWORK_YAML)
    (tmp_path / "s.txt").write_text(text)
    assert main(["import-astra", str(tmp_path / "n.yml"), "--system",
                 str(tmp_path / "s.txt")]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_export_refuses_a_leaf_spine_fabric(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "ls.yaml"
    spec.write_text("fabric: {kind: leaf_spine, leaves: 2, spines: 2, hosts_per_leaf: 2, "
                    "host_link_mbit_s: 20, uplink_mbit_s: 20}\n")
    assert main(["export-astra", str(spec), "--out", str(tmp_path / "o")]) == 2
    assert "fabric.kind: ASTRA-sim's hierarchical networks are multidim" in (
        capsys.readouterr().err)


def test_parse_errors_name_the_source() -> None:
    with pytest.raises(SpecError, match=r"^x\.yml: latency: has 1 values for 2 dimensions$"):
        af.parse_network_yaml("topology: [Ring, Switch]\nnpus_count: [2, 2]\n"
                              "bandwidth: [1, 1]\nlatency: [1]\n", "x.yml")


def test_a_network_file_is_read_as_the_format_its_keys_say(tmp_path: Path) -> None:
    (tmp_path / "n.yml").write_text(NETWORK_YAML)
    (tmp_path / "n.json").write_text(NETWORK_JSON)
    assert af.read_network(tmp_path / "n.yml") == af.parse_network_yaml(NETWORK_YAML)
    assert af.read_network(tmp_path / "n.json") == af.parse_network_json(NETWORK_JSON)
    (tmp_path / "bad.yml").write_bytes(b"\xff\xfe")
    for path, words in ((tmp_path / "bad.yml", "is not UTF-8 text"),
                        (tmp_path / "none.yml", "cannot read")):
        with pytest.raises(SpecError) as exc:
            af.read_network(path)
        assert words in str(exc.value) and str(path) in str(exc.value)


LATENT_YAML = """topology: [ Ring, Switch ]
npus_count: [ 4, 2 ]
bandwidth: [ 50.0, 25.0 ]
latency: [ 500.0, 1500.0 ]
"""


def test_import_maps_each_dimension_s_link_latency_to_its_delay(tmp_path: Path) -> None:
    """ASTRA-sim's ns per link is the dimension's delay_us per link (2.0 YAML and 1.0 JSON)."""
    dims = af.parse_network_yaml(LATENT_YAML)
    spec, notes = af.to_spec(dims, None, "x")
    assert [d.get("delay_us") for d in spec["fabric"]["dims"]] == [0.5, 1.5]
    assert not any("latenc" in n for n in notes)
    as_json = af.parse_network_json(af.network_json(dims))
    assert [d.latency_ns for d in as_json] == [500.0, 1500.0]
    (tmp_path / "net.yml").write_text(LATENT_YAML)
    out = tmp_path / "fabric.yaml"
    assert main(["import-astra", str(tmp_path / "net.yml"), "--out", str(out)]) == 0
    fabric = yaml.safe_load(out.read_text())["fabric"]
    assert [d["delay_us"] for d in fabric["dims"]] == [0.5, 1.5]


def test_export_writes_each_dimension_s_delay_as_its_link_latency(tmp_path: Path) -> None:
    spec = {**SPEC, "fabric": {**SPEC["fabric"], "dims": [
        {**d, "delay_us": us} for d, us in zip(SPEC["fabric"]["dims"], (2, 0, 0.25),
                                               strict=True)]}}
    run = expand(spec)[0]
    dims, _system = af.from_spec(run.fabric, run.jobs[0])
    assert [d.latency_ns for d in dims] == [2000, 0, 250]
    assert "latency: [ 2000.0, 0.0, 250.0 ]" in af.network_yaml(dims)
    assert json.loads(af.network_json(dims))["link-latency"] == [2000, 0, 250]
    assert _spec_round_trip(spec)["fabric"] == {**spec["fabric"], "dims": [
        {k: v for k, v in d.items() if (k, v) != ("delay_us", 0)} for d in spec["fabric"]["dims"]]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["export-astra", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")]) == 0
    back = af.parse_network_yaml((tmp_path / "o" / "network.yml").read_text())
    assert [d.latency_ns for d in back] == [2000, 0, 250]
