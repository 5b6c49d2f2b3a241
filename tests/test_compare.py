"""Headline comparisons (analysis.compare): who is compared with whom, and what is said."""

from __future__ import annotations

import pytest

from analysis.compare import RunFacts, headlines

KIB, MIB = 1024, 1024 * 1024


def facts(label: str, setup: str = "s", *, policy: str = "ecmp", schedule: str = "ring",
          transport: str = "zerocopy", times: dict[int, float] | None = None,
          slowdown: float | None = None, simulated: bool = False, trusted: bool = True,
          model_s: float | None = None) -> RunFacts:
    times = times or {MIB: 1.0}
    head = max(times)
    job = {"mean_s": times[head], "size_bytes": head, "slowdown": slowdown,
           "sizes": {str(s): {"collective_s": t, "collective_real_s": t}
                     for s, t in times.items()}}
    return RunFacts(label, setup, {"policy": policy, "schedule": schedule,
                                   "transport": transport}, {"j": job}, simulated, trusted,
                    {"j": model_s} if model_s else {})


def test_routing_headline_gives_the_slowdown_ratio_against_ecmp():
    (h,) = headlines([facts("v", policy="vclos", slowdown=1.0, times={MIB: 1.0}),
                      facts("e", policy="ecmp", slowdown=2.5, times={MIB: 2.5})])
    assert h.title == "Routing: vclos vs ecmp" and (h.ref, h.other) == ("e", "v")
    assert h.number == pytest.approx(2.5)
    assert "2.50× mean" in h.sentence and "slowdown ratio 2.50×" in h.sentence
    assert h.rows == [{"job": "j", "size_bytes": MIB, "ref_s": 2.5, "ref_real_s": 2.5,
                       "other_s": 1.0, "other_real_s": 1.0, "speedup": 2.5}]


def test_schedule_headline_puts_the_model_beside_the_measurement():
    (h,) = headlines([facts("t", schedule="themis", times={MIB: 2.0}, model_s=1.6),
                      facts("b", schedule="baseline", times={MIB: 3.0}, model_s=2.4)])
    assert h.number == pytest.approx(1.5)
    assert h.sentence == "themis is 1.50× as fast as baseline (the model predicts 1.50×)"


def test_flat_collectives_are_measured_against_the_ring_in_any_order():
    """ring is the collectives' reference: the headline does not depend on run order."""
    for order in (1, -1):
        (h,) = headlines([facts("hd", schedule="halving-doubling", times={MIB: 2.0}),
                          facts("ring", schedule="ring", times={MIB: 1.0})][::order])
        assert (h.ref, h.other) == ("ring", "hd")
        assert h.sentence.startswith("halving-doubling is 0.50× as fast as ring")


def test_transport_headline_has_every_size():
    sizes_zc = {4 * KIB: 0.001, 64 * KIB: 0.002, 4 * MIB: 0.1}
    sizes_rpc = {4 * KIB: 0.009, 64 * KIB: 0.006, 4 * MIB: 0.11}
    (h,) = headlines([facts("zc", times=sizes_zc), facts("rpc", transport="rpc",
                                                          times=sizes_rpc)])
    assert h.title == "Transport: zerocopy vs rpc" and h.ref == "rpc"
    assert h.sentence == ("zerocopy is faster than rpc by 4KiB 9.00×, 64KiB 3.00×, "
                          "4MiB 1.10×")
    assert [r["size_bytes"] for r in h.rows] == [4 * KIB, 64 * KIB, 4 * MIB]


def test_simulated_transport_comparison_is_not_applicable():
    (h,) = headlines([facts("zc", simulated=True),
                      facts("rpc", transport="rpc", simulated=True)])
    assert h.number is None and h.sentence.startswith("n/a") and h.rows == []


def test_only_runs_sharing_a_setup_and_differing_in_one_axis_are_compared():
    unrelated = [facts("a", "fabric-1"), facts("b", "fabric-2", policy="vclos")]
    assert headlines(unrelated) == []
    two_axes = [facts("a"), facts("b", policy="vclos", transport="rpc")]
    assert headlines(two_axes) == []
    repeats = [facts("a"), facts("b")]
    assert headlines(repeats) == []


def test_untrusted_runs_carry_a_caveat_and_the_first_run_is_the_default_reference():
    (h,) = headlines([facts("x", policy="shortest"), facts("y", policy="vclos", trusted=False)])
    assert h.ref == "x" and any("do not trust" in c for c in h.caveats)
    assert "no solo baselines" in h.sentence


def test_repeats_give_median_min_max_and_say_when_the_spread_crosses_one():
    ecmp = [facts(f"e{k}", policy="ecmp", slowdown=s, times={MIB: s})
            for k, s in enumerate((0.9, 2.0, 1.5))]
    vclos = [facts(f"v{k}", policy="vclos", slowdown=1.0) for k in range(3)]
    (h,) = headlines(ecmp + vclos)
    assert h.number == pytest.approx(1.5) and h.spread == (pytest.approx(0.9), 2.0)
    assert (h.ref, h.other) == ("e2", "v2")  # the median repeat speaks, its pair beside it
    assert h.sentence.endswith("over 3 repeats: median 1.50× [0.90×, 2.00×] — the spread "
                               "crosses 1.0: the repeats disagree on which is better")
    (steady,) = headlines(ecmp[1:] + vclos[1:])
    assert "crosses" not in steady.sentence and "median 1.75× [1.50×, 2.00×]" in steady.sentence


def test_one_untrusted_repeat_taints_the_headline_over_the_repeats():
    """The median repeat speaks, but a repeat beside it that failed its fidelity check is
    still said: the median and its spread include it."""
    ecmp = [facts(f"e{k}", policy="ecmp", slowdown=s, times={MIB: s})
            for k, s in enumerate((2.0, 2.2, 1.5))]
    vclos = [facts(f"v{k}", policy="vclos", slowdown=1.0, trusted=k != 2) for k in range(3)]
    (h,) = headlines(ecmp + vclos)
    assert (h.ref, h.other) == ("e0", "v0")
    assert h.caveats == ["run “v2” failed its fidelity check: do not trust this comparison"]


def test_repeats_of_one_run_get_its_own_headlines_over_the_repeats():
    runs = [facts(f"r{k}", slowdown=s) for k, s in enumerate((1.2, 1.4, 1.3))]
    (h,) = headlines(runs)
    assert h.title.startswith("Contention under ecmp") and h.number == pytest.approx(1.3)


def test_runs_differing_only_by_transport_on_the_ladder_lead_with_its_headline():
    """Per size, the rung whose cost adds most to the gap between the lowest and highest rung
    is named by what it adds (the transports' registry attributes)."""
    ladder = {"zerocopy": (1.0, 10.0), "staged": (1.1, 12.0), "serialised": (1.2, 40.0),
              "rpc-lite": (1.3, 41.0), "rpc-lite-sw": (1.6, 44.0), "rpc-proto": (9.5, 50.0),
              "rpc": (9.0, 45.0)}
    runs = [facts(t, transport=t, times={4 * KIB: a, 64 * MIB: b}) for t, (a, b) in ladder.items()]
    heads = headlines(runs)
    lead = heads[0]
    assert lead.title == "Transport ladder: zerocopy to rpc (7 rungs)"
    assert (lead.ref, lead.other) == ("rpc", "zerocopy")
    assert "4KiB: framework: grpc" in lead.sentence and "(rpc-proto, 99% of the gap)" in (
        lead.sentence)
    assert ("64MiB: message: the tensor as a protobuf message, not raw bytes (serialised, 80% "
            "of the gap)") in lead.sentence
    assert lead.number == pytest.approx(4.5)  # at the headline size: 45 ÷ 10
    assert len(heads) == 7  # then every rung against rpc, as before


def test_two_transports_make_no_ladder_headline():
    (h,) = headlines([facts("zc"), facts("rpc", transport="rpc")])
    assert not h.title.startswith("Transport ladder")
