"""Fabric spec validation: good specs load, every mistake is named in one sentence."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdn_app.allocation.ocs import RENAMED_REWIRINGS, REWIRINGS
from testbed.core.errors import SpecError
from testbed.core.spec import (
    MAX_HOSTS,
    MAX_LINK_MBIT_S,
    OcsLeafSpineSpec,
    load_fabric,
    parse_fabric,
    upgrade_fabric,
)

LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
              "host_link_mbit_s": 50, "uplink_mbit_s": 50}
MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40, "kind": "switch"},
                                         {"size": 4, "mbit_s": 20, "kind": "ring"}]}


def err(fabric: dict) -> str:
    with pytest.raises(SpecError) as exc:
        parse_fabric({"fabric": fabric})
    return str(exc.value)


def test_good_specs_load():
    ls = parse_fabric({"fabric": LEAF_SPINE})
    assert (ls.num_hosts, ls.num_switches) == (4, 4)
    md = parse_fabric({"fabric": MULTIDIM})
    assert md.sizes == (2, 4) and md.num_hosts == 8 and md.num_switches == 4
    ocs = parse_fabric({"fabric": LEAF_SPINE | {"kind": "ocs_leaf_spine", "ocs_count": 2}})
    assert ocs.num_switches == 6


def test_ready_fabric_files_load():
    from pathlib import Path

    files = sorted(Path("experiments/fabrics").glob("*.yaml"))
    assert files
    for f in files:
        load_fabric(f)


@pytest.mark.parametrize(("change", "field", "reason"), [
    ({"leaves": 0}, "fabric.leaves", "greater than or equal to 1"),
    ({"spines": -1}, "fabric.spines", "greater than or equal to 1"),
    ({"uplink_mbit_s": 0}, "fabric.uplink_mbit_s", "greater than 0"),
    ({"host_link_mbit_s": MAX_LINK_MBIT_S + 1}, "fabric.host_link_mbit_s", "shapes faithfully"),
    ({"colour": "red"}, "fabric.colour", "unknown key"),
    ({"kind": "torus"}, "fabric", "kind must be one of"),
    ({"leaves": 20, "hosts_per_leaf": 20}, "fabric", f"at most {MAX_HOSTS}"),
    ({"hosts_per_leaf": "many"}, "fabric.hosts_per_leaf", "valid integer"),
])
def test_bad_leaf_spine_names_field(change, field, reason):
    msg = err(LEAF_SPINE | change)
    assert f"{field}:" in msg and reason in msg


def test_bad_multidim_names_dimension():
    bad = {"kind": "multidim", "dims": [{"size": 2, "mbit_s": 40}, {"size": 4, "mbit_s": -3}]}
    assert "fabric.dims.1.mbit_s: Input should be greater than 0" in err(bad)
    assert "fabric.dims.0.kind" in err({"kind": "multidim", "dims": [{"size": 2, "mbit_s": 1,
                                                                       "kind": "mesh"}]})
    assert "fabric.dims" in err({"kind": "multidim", "dims": []})


OLD_LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2,
                  "host_link_mbps": 50, "uplink_mbps": 40}
OLD_MULTIDIM = {"kind": "multidim", "dims": [{"size": 2, "mbps": 40, "kind": "switch"},
                                             {"size": 4, "mbps": 20, "kind": "ring"}]}


def test_old_field_names_still_load(tmp_path):
    """Experiment files written with the ``*_mbps`` names run unchanged."""
    ls = parse_fabric({"fabric": OLD_LEAF_SPINE})
    assert (ls.host_link_mbit_s, ls.uplink_mbit_s) == (50, 40)
    ocs = parse_fabric({"fabric": OLD_LEAF_SPINE | {"kind": "ocs_leaf_spine", "ocs_count": 2}})
    assert ocs.uplink_mbit_s == 40
    md = parse_fabric({"fabric": OLD_MULTIDIM})
    assert [d.mbit_s for d in md.dims] == [40, 20]
    assert md == parse_fabric({"fabric": MULTIDIM})
    assert "mbps" not in str(md.model_dump())  # only the new names are written
    f = tmp_path / "old.yaml"
    f.write_text("fabric: {kind: leaf_spine, leaves: 2, spines: 2, hosts_per_leaf: 2,\n"
                 "         host_link_mbps: 50, uplink_mbit_s: 40}\n")
    assert load_fabric(f) == ls
    assert upgrade_fabric(OLD_MULTIDIM) == MULTIDIM
    assert upgrade_fabric(OLD_LEAF_SPINE) == LEAF_SPINE | {"uplink_mbit_s": 40}


def test_old_names_are_explained_under_the_new_name():
    both = LEAF_SPINE | {"uplink_mbps": 50}
    assert err(both) == ("spec: fabric: uplink_mbit_s is also given as uplink_mbps (its old "
                         "name): keep only uplink_mbit_s")
    too_fast = OLD_LEAF_SPINE | {"host_link_mbps": MAX_LINK_MBIT_S + 1}
    assert "fabric.host_link_mbit_s:" in err(too_fast) and "shapes faithfully" in err(too_fast)
    dims = {"kind": "multidim", "dims": [{"size": 2, "mbps": 40, "mbit_s": 40},
                                         {"size": 4, "mbps": -3}]}
    msg = err(dims)
    assert "fabric.dims.0: mbit_s is also given as mbps" in msg
    assert "fabric.dims.1.mbit_s: Input should be greater than 0" in msg


def test_ocs_rewiring_is_one_of_the_allocators():
    ocs = LEAF_SPINE | {"kind": "ocs_leaf_spine", "ocs_count": 2}
    assert parse_fabric({"fabric": ocs}).ocs_rewiring == "any"
    assert parse_fabric({"fabric": ocs | {"ocs_rewiring": "augment"}}).ocs_rewiring == "augment"
    msg = err(ocs | {"ocs_rewiring": "magic"})
    assert "fabric.ocs_rewiring:" in msg and "'augment'" in msg
    field = OcsLeafSpineSpec.model_fields["ocs_rewiring"].annotation
    assert set(get_args(field)) == set(REWIRINGS) | set(RENAMED_REWIRINGS)  # old names too


def test_ocs_needs_spine_ports():
    msg = err(LEAF_SPINE | {"kind": "ocs_leaf_spine", "ocs_count": 1, "leaves": 5})
    assert "5 leaves need at least 3 spines" in msg


def test_missing_fabric_and_bad_yaml(tmp_path):
    with pytest.raises(SpecError, match="fabric: Field required"):
        parse_fabric({})
    bad = tmp_path / "bad.yaml"
    bad.write_text("fabric: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML at line"):
        load_fabric(bad)
    with pytest.raises(SpecError, match="cannot read spec"):
        load_fabric(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(SpecError, match="expected a mapping"):
        load_fabric(tmp_path / "list.yaml")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2000) | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(["kind", "leaves", "spines", "hosts_per_leaf", "host_link_mbit_s",
                        "uplink_mbit_s", "host_link_mbps", "uplink_mbps", "ocs_count", "dims",
                        "size", "mbit_s", "mbps", "x"])


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(keys, json_values | st.sampled_from(["leaf_spine", "multidim",
                                                             "ocs_leaf_spine"]), max_size=7))
def test_arbitrary_input_is_accepted_or_explained(fabric):
    """No input, however odd, escapes as anything but a SpecError with a field path."""
    try:
        spec = parse_fabric({"fabric": fabric})
    except SpecError as exc:
        assert str(exc).startswith("spec: ") and "\n" not in str(exc)
        assert "fabric" in str(exc)
    else:
        assert spec.num_hosts <= MAX_HOSTS
