"""The compiled kernels (numba, :mod:`testbed.sim.compiled`) give the numpy code's results to
the last bit: the filler's rates, components' labels and incidences on the same inputs, and
the pinned ECMP run of ``test_sim_exact`` through the numpy code when numba is installed (the
default path then is the compiled one, which ``test_sim_exact`` pins)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from testbed.sim import compiled, maxmin, occupancy
from testbed.sim.flows import Network

needs_numba = pytest.mark.skipif(not compiled.AVAILABLE,
                                 reason="numba is not installed (the extra sim-fast)")


def random_incidence(rng: np.random.Generator, trial: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A component as ``fill_rates`` takes it: caps that tie, links that bind or not, flows
    crossing a link several times; entries in flow order or shuffled."""
    n_flows, n_links = int(rng.integers(1, 40)), int(rng.integers(1, 60))
    pairs = {(int(rng.integers(n_flows)), int(rng.integers(n_links)))
             for _ in range(int(rng.integers(1, 4 * n_flows)))}
    ordered = sorted(pairs)
    if trial % 2:
        rng.shuffle(ordered)
    e_flow = np.array([p[0] for p in ordered], dtype=np.int64)
    e_link = np.array([p[1] for p in ordered], dtype=np.int64)
    mult = rng.integers(1, 4, len(ordered)).astype(float)
    link_cap = rng.choice([1e9, 2e9, 4e9, 1e11], n_links)
    if trial % 3 == 0:
        link_cap = link_cap * rng.uniform(0.5, 2.0, n_links)
    flow_cap = rng.choice([1e9 / 3, 5e8, 1e10 / 7, 2e9], n_flows)
    if trial % 5 == 0:
        flow_cap = np.full(n_flows, 1e9)
    if trial % 7 == 0:  # caps below a level within the slack: the rounds' mixed case
        flow_cap = flow_cap * (1 - rng.integers(0, 2, n_flows) * 1e-13)
    return flow_cap, e_flow, e_link, mult, link_cap


@needs_numba
def test_the_compiled_filler_gives_the_numpy_rates_to_the_bit() -> None:
    rng = np.random.default_rng(44)
    for trial in range(400):
        args = random_incidence(rng, trial)
        want = maxmin.fill_rates_rounds(*args)
        got = maxmin.fill_rates_compiled(*args)
        assert want.tobytes() == got.tobytes(), trial


@needs_numba
def test_the_compiled_labels_are_the_propagated_ones() -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        flow_cap, e_flow, e_link, mult, link_cap = random_incidence(rng, trial)
        order = np.argsort(e_flow, kind="stable")
        incidence = occupancy.Incidence(e_flow[order], e_link[order], mult[order], link_cap)
        compiled_labels = incidence.labels(len(flow_cap))
        try:
            occupancy.COMPILED = False
            numpy_labels = incidence.labels(len(flow_cap))
        finally:
            occupancy.COMPILED = compiled.AVAILABLE
        assert compiled_labels.tolist() == numpy_labels.tolist(), trial


def _graph(incidence: occupancy.Incidence) -> list[tuple[float, tuple[tuple[int, float], ...]]]:
    """An incidence up to the numbering of its links and the order of its entries: per link,
    its capacity and its (flow position, multiplicity) pairs, sorted."""
    on_link: dict[int, list[tuple[int, float]]] = {}
    for f, link, k in zip(incidence.flow.tolist(), incidence.link.tolist(),
                          incidence.mult.tolist(), strict=True):
        on_link.setdefault(link, []).append((f, k))
    return sorted((float(incidence.link_cap[link]), tuple(sorted(pairs)))
                  for link, pairs in on_link.items())


@needs_numba
def test_the_compiled_incidence_is_the_numpy_one() -> None:
    """The pool's incidence (busy links patched as flows come and go) holds the entries the
    numpy code rebuilds from the routes, and gives the same labels and rates, as flows start
    and, in turn, end."""
    rng = np.random.default_rng(3)
    net = Network(default_capacity=1e9)
    for n in range(60):
        paths = [[("l", int(x)) for x in rng.choice(40, size=3, replace=False)]
                 for _ in range(int(rng.integers(1, 4)))]
        net.add_bundle(paths, float(rng.integers(1, 100)) * 1e6, owner=n % 7)
    occ = net.occupancy
    checked = 0
    while net.active:
        flows = sorted(net.active, key=lambda f: f.id)
        got = occ.incidence(flows)
        for f in flows:
            f._busy_idx = None
        try:
            occupancy.COMPILED = False
            want = occ.incidence(flows)
        finally:
            occupancy.COMPILED = compiled.AVAILABLE
        assert got.flow.tolist() == sorted(got.flow.tolist())
        assert _graph(got) == _graph(want)
        assert got.labels(len(flows)).tolist() == want.labels(len(flows)).tolist()
        caps = np.array([f.cap for f in flows])
        args = (got.flow, got.link, got.mult, got.link_cap)
        assert (maxmin.fill_rates(caps, *args).tolist()
                == maxmin.fill_rates_rounds(caps, want.flow, want.link, want.mult,
                                            want.link_cap).tolist())
        checked += 1
        net.step()
    assert checked > 20


@needs_numba
def test_the_pinned_run_through_the_numpy_code(monkeypatch) -> None:
    from test_sim_exact import run_exact

    monkeypatch.setattr(maxmin, "COMPILED", False)
    monkeypatch.setattr(occupancy, "COMPILED", False)
    recorded = json.loads((Path(__file__).parent / "data" / "sim_exact.json").read_text())
    got = run_exact()
    assert got["summary"] == recorded["summary"]
    assert got["jobs"] == recorded["jobs"]


def test_the_kernel_cache_is_private(tmp_path, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(compiled.pwd, "getpwuid",
                        lambda uid: type("Entry", (), {"pw_dir": str(home)}))
    path = compiled.private_cache_dir()
    assert path == str(home / ".cache" / "fabriclab" / "numba")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    os.chmod(home / ".cache" / "fabriclab", 0o777)  # another user could swap the cache
    assert compiled.private_cache_dir() is None


def test_the_filler_without_numba_is_the_numpy_one(monkeypatch) -> None:
    monkeypatch.setattr(maxmin, "COMPILED", False)
    args = random_incidence(np.random.default_rng(1), 1)
    assert maxmin.fill_rates(*args).tolist() == maxmin.fill_rates_rounds(*args).tolist()
