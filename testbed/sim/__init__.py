"""Simulated backend: the same fabrics, planners and allocator at cluster scale.

* :mod:`testbed.sim.flows` — event-driven flow-level network, max-min fair sharing.
* :mod:`testbed.sim.maxmin` — progressive filling: the pure-Python reference and numpy.
* :mod:`testbed.sim.occupancy` — which flows are on which links; connected components.
* :mod:`testbed.sim.collectives` — ring, halving-doubling and Themis/baseline hierarchical
  All-Reduce as synchronous steps of flows.
* :mod:`testbed.sim.cluster` — leaf-spine routing (ECMP, vClos, OCS-vClos) and the
  multi-tenant FIFO cluster simulation.
* :mod:`testbed.sim.traces` — Helios / Philly trace readers and a synthetic generator.
* :mod:`testbed.sim.peak_memory` — a run's peak resident memory in a long-lived process.
* :mod:`testbed.cli.simulate_cluster` — ``fabriclab simulate-cluster``.
"""
