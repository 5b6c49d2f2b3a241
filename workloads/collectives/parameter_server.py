"""``ps``: the parameter-server pattern as TensorFlow runs it, as an All-Reduce.

The buffer is a model's gradients, one tensor per *variable*; each variable lives whole on one
parameter server, round-robin over the servers (``replica_device_setter``'s default). Every
rank is a worker: it *pushes* each variable's gradient to that variable's server, one tensor
per variable; a server adds what every worker pushed to its own gradient, then every worker
*pulls* each variable's aggregate back (the update itself is the identity, so the result is
the All-Reduce sum and the workers check it exactly).

Servers are ranks: the job's first ``servers`` positions each host one server beside their
worker (a PS task per machine, as in the paper's cluster); ``servers`` beyond the group's
size are clipped to it. Links are the ``direct`` collective's (link ``k-1`` of position ``p``
sends to ``p+k`` and receives from ``p-k``), so every worker reaches every server.

Variables (knobs, ``options: {ps: {...}}``): ``model`` splits the buffer in proportion to a
DNN profile's parameter layers (:mod:`workloads.dnn`: ``resnet50``, ``gnmt``,
``transformer``, ...), last layer first as backprop produces them; without it the buffer is
``variables`` equal tensors (0: one per server). A variable that gets no element at a small
buffer is not sent. In a DNN job (:mod:`workloads.worker`'s ``run_dnn``) each bucket says which
of the model's variables it holds, by their global index, and each goes to the server of that
index: with ``bucket_cap_mb: 0`` (one bucket per layer) every collective is one variable, sent
whole to its server, one tensor per RPC with the rpc transports, as TensorFlow sends them. The
simulator places a DNN bucket's variables the same way (:meth:`variable_transfers`).

Bytes: a worker sends every variable it does not serve and receives it back; a server
receives ``n-1`` copies of each of its variables and sends ``n-1``. All ranks together send
``2(n-1)·S``, a ring's total, but unevenly: :meth:`ParameterServer.sent_bytes` is the mean per
rank. Only a flat job runs it (it has no Reduce-Scatter and All-Gather of equal shards).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from testbed.core.errors import FabricLabError
from workloads.collectives.base import Collective, Group, Transfer, all_pairs_roles
from workloads.collectives.direct import exchange
from workloads.transports import Tag

PUSH, PULL = 0, 1  # the transfer steps


class PsOptions(BaseModel):
    """The ``ps`` collective's knobs."""

    model_config = ConfigDict(extra="forbid")
    servers: int = Field(default=1, ge=1)
    model: str | None = None  # a workloads.dnn model: its layers are the variables
    variables: int = Field(default=0, ge=0)  # without a model: this many equal variables

    @field_validator("model")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        from workloads.dnn import canonical

        return None if name is None else canonical(name)


@cache
def _layer_params(model: str) -> tuple[int, ...]:
    from workloads.dnn import MODELS

    return tuple(layer.params for layer in reversed(MODELS[model].layers))


class ParameterServer(Collective):
    """Push every variable to its server, which sums; pull every aggregate back."""

    name = "ps"
    options_model = PsOptions
    per_dimension = False

    def __init__(self, options: PsOptions | None = None) -> None:
        self.options = options or PsOptions()

    def configure(self, options: PsOptions) -> ParameterServer:
        return ParameterServer(options)

    # -- the variables and their servers (pure) ---------------------------------------------

    def servers(self, n: int) -> int:
        return min(self.options.servers, n)

    def weights(self, n: int) -> tuple[int, ...]:
        """Each variable's share of the buffer (parameter counts, or equal)."""
        o = self.options
        if o.model is not None:
            return _layer_params(o.model)
        return (1,) * (o.variables or self.servers(n))

    def variable_bounds(self, count: int, n: int) -> list[tuple[int, int]]:
        """Each variable's element range of a ``count``-element buffer."""
        from workloads.dnn import split_bounds

        return split_bounds(count, self.weights(n))

    def server_of(self, variable: int, n: int) -> int:
        """The position serving ``variable`` (round-robin)."""
        return variable % self.servers(n)

    # -- workers -----------------------------------------------------------------------------

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        return all_pairs_roles(pos, n)

    def all_reduce(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0) -> None:
        bounds = self.variable_bounds(buf.size, group.size)
        self._push_pull(group, buf, coll, chunk, phase,
                        [(v, lo, hi) for v, (lo, hi) in enumerate(bounds)])

    def all_reduce_variables(self, group: Group, buf: np.ndarray, coll: int,
                             variables: list[tuple[int, int, int]]) -> None:
        """``buf`` holds the given variables (global index, first, end element): each goes
        to the server of its global index."""
        self._push_pull(group, buf, coll, 0, 0, variables)

    def _push_pull(self, group: Group, buf: np.ndarray, coll: int, chunk: int, phase: int,
                   bounds: list[tuple[int, int, int]]) -> None:
        n, p = group.size, group.pos
        if n == 1:
            return
        variables = [(v, buf[lo:hi], self.server_of(v, n)) for v, lo, hi in bounds if hi > lo]

        def to(q: int):  # the link sending to position q
            return group.links[(q - p) % n - 1]

        def source(q: int):  # the link receiving from position q
            return group.links[(p - q) % n - 1]

        peers = [q for q in range(n) if q != p]
        # push: every worker's gradients to their servers; each server sums its variables
        sends = [(to(s), Tag(coll, chunk, phase, PUSH, v), g) for v, g, s in variables if s != p]
        receives = [(source(q), Tag(coll, chunk, phase, PUSH, v), g, True)
                    for v, g, s in variables if s == p for q in peers]
        exchange(sends, receives)
        # pull: every server's aggregates back to every worker
        sends = [(to(q), Tag(coll, chunk, phase, PULL, v), g)
                 for v, g, s in variables if s == p for q in peers]
        receives = [(source(s), Tag(coll, chunk, phase, PULL, v), g, False)
                    for v, g, s in variables if s != p]
        exchange(sends, receives)

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        raise FabricLabError("the ps collective runs as a flat job's algorithm only, not as "
                             "a dimension's (dim_algorithm)")

    all_gather = reduce_scatter  # type: ignore[assignment]

    # -- simulator and model -------------------------------------------------------------------

    def _steps(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        w = self.weights(n)
        total = sum(w)
        return self._placed_steps(n, [(v, size_bytes * share / total)
                                      for v, share in enumerate(w)])

    def _placed_steps(self, n: int, variables: list[tuple[int, float]]
                      ) -> list[list[Transfer]]:
        """Push then pull of each (global index, bytes) variable, at the server of its index."""
        push, pull = [], []
        for v, nbytes in variables:
            s = self.server_of(v, n)
            push += [(q, s, nbytes) for q in range(n) if q != s]
            pull += [(s, q, nbytes) for q in range(n) if q != s]
        return [push, pull]

    def variable_transfers(self, n: int, variables: list[tuple[int, float]]
                           ) -> list[list[Transfer]]:
        """A DNN bucket's variables, each at the server of its global index, as the workers
        place them (:meth:`all_reduce_variables`)."""
        return self._placed_steps(n, [(v, b) for v, b in variables if b > 0]) if n > 1 else []

    def transfers(self, op: str, n: int, size_bytes: float) -> list[list[Transfer]]:
        if op != "AR":
            raise FabricLabError(f"the ps collective has no {op} phase: it runs as a flat "
                                 "job's algorithm only")
        return self._steps(n, size_bytes) if n > 1 else []

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return self._steps(n, size_bytes)[:1]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        return self._steps(n, shard_bytes)[1:]

    def sent_bytes(self, op: str, n: int, size_bytes: float) -> float:
        """The mean per rank: every variable goes ``n-1`` times each way."""
        if op != "AR":
            raise FabricLabError(f"the ps collective has no {op} phase")
        return 2 * (n - 1) * size_bytes / n


COLLECTIVE = ParameterServer()
