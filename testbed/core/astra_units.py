"""ASTRA-sim's GB/s: the one definition fabriclab reads and writes ASTRA-sim's rates with.

ASTRA-sim's GB is 2**30 bytes (and its second 10**9 ns). ASTRA-sim 1.0's analytical backend,
astra-network-analytical at d27635b (the submodule of astra-sim's ``ASTRA-sim-1.0`` branch),
converts each dimension's configured ``link-bandwidth`` in ``src/main.cc``, function ``main``,
lines 175-176: ``link_bandwidth_b_ns = link_bandwidths[i] * (1 << 30) / 1'000'000'000``
(bytes per ns). ASTRA-sim 2.x's analytical backends do the same in
``common/NetworkFunction.cpp``, ``bw_GBps_to_Bpns`` (``bw_GBps * (1 << 30) / 1'000'000'000``).
So 1 GB/s of an ASTRA-sim file is 1.073741824 bytes/ns, 8589.934592 Mbit/s, and the Themis
paper's 100 GB/s dimension is 859 Gbit/s. (nccl-tests' GB/s, ``_gbyte_s`` columns of
``allreduce``, are 10**9 bytes/s: a different unit, kept apart in ``testbed.core.units``; so
is a 2.x system file's ``local-mem-bw``, which 2.x's system layer divides by 10**9 bytes:
``workloads.training.collectives.local_reduction_ns``, matched by ``benchmarks/chakra_astra2.py``.)
"""

from __future__ import annotations

ASTRA_GBYTE_BYTES = 2**30  # bytes in ASTRA-sim's GB
ASTRA_GBYTE_S_IN_BIT_S = ASTRA_GBYTE_BYTES * 8  # 8589934592
ASTRA_GBYTE_S_IN_MBIT_S = ASTRA_GBYTE_S_IN_BIT_S / 1e6  # 8589.934592 (exact in a float)
ASTRA_GBYTE_S_IN_BYTES_PER_NS = ASTRA_GBYTE_BYTES / 1e9  # 1.073741824

