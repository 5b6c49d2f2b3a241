"""A small mixed-integer program builder over HiGHS (``highspy``), solved to optimality.

Variables are added with bounds and a cost, rows as sparse ``{variable: coefficient}``
with lower and upper bounds; :meth:`Milp.solve` minimises and returns the integer values
of every variable, or None when the program is infeasible. Proven answers are remembered by
model (:data:`SOLVED`); :data:`STATS` counts what HiGHS did in this process.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import highspy
import numpy as np

INF = math.inf
# HiGHS's own class, without highspy's Python wrapper: the wrapper enables callbacks in its
# constructor, which prints HiGHS's banner before any option can turn output off (HiGHS
# issue 2749), once per process, in the middle of a report. Falls back to the wrapper.
_HIGHS = getattr(getattr(highspy, "_core", None), "_Highs", highspy.Highs)
# Proven answers by model (the SHA-256 of its arrays), so a model met again is not solved again (the
# FIFO queue's head is placed again after every departure); cleared when it holds MAX_SOLVED.
SOLVED: dict[bytes, tuple[tuple[int, ...] | None, bool]] = {}  # answer, proven infeasible
MAX_SOLVED = 20000


@dataclass
class SolverStats:
    """What the solver did: ``solved`` models HiGHS ran, ``unproven`` of them stopped by
    their time cap without a proof (the best answer found was taken, or none), ``reused``
    answers taken from :data:`SOLVED` without HiGHS, ``solver_s`` wall time inside HiGHS."""

    solved: int = 0
    unproven: int = 0
    reused: int = 0
    solver_s: float = 0.0


STATS = SolverStats()  # this process's, since it began (a run takes the difference)


class Milp:
    """A minimisation over integer variables (all of them integer)."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.row_starts: list[int] = [0]
        self.row_index: list[int] = []
        self.row_value: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.proven = True  # the last solve proved its answer (optimum or infeasibility)
        self.infeasible = False  # the last solve proved that no solution exists

    def var(self, upper: float = 1, cost: float = 0.0, lower: float = 0) -> int:
        """A new integer variable in [lower, upper]; its index."""
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.cost) - 1

    def row(self, terms: dict[int, float], lower: float = -INF, upper: float = INF) -> None:
        """``lower <= sum(coef * x[var]) <= upper``."""
        for index, value in terms.items():
            self.row_index.append(index)
            self.row_value.append(value)
        self.row_starts.append(len(self.row_index))
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def solve(self, time_limit_s: float = INF) -> list[int] | None:
        """Optimal values (rounded), or None if infeasible. With a ``time_limit_s`` that
        runs out: the best solution found by then (:attr:`proven` False), or None.

        A model solved before (the same arrays) gets its proven answer back from
        :data:`SOLVED` without HiGHS: one thread, HiGHS answers the same model the same way."""
        self.proven, self.infeasible = True, False
        if not self.cost:
            return []
        arrays = (
            np.array(self.cost, dtype=np.float64), np.array(self.lower, dtype=np.float64),
            np.array(self.upper, dtype=np.float64), np.array(self.row_lower, dtype=np.float64),
            np.array(self.row_upper, dtype=np.float64), np.array(self.row_starts, dtype=np.int32),
            np.array(self.row_index, dtype=np.int32), np.array(self.row_value, dtype=np.float64))
        key = hashlib.sha256(b"|".join(a.tobytes() for a in arrays)).digest()
        if key in SOLVED:
            STATS.reused += 1
            found, self.infeasible = SOLVED[key]
            return None if found is None else list(found)
        start = time.perf_counter()
        found = self._run(arrays, time_limit_s)
        STATS.solved += 1
        STATS.unproven += not self.proven
        STATS.solver_s += time.perf_counter() - start
        if self.proven:
            if len(SOLVED) >= MAX_SOLVED:
                SOLVED.clear()
            SOLVED[key] = (None if found is None else tuple(found), self.infeasible)
        return found

    def _run(self, arrays: tuple[np.ndarray, ...], time_limit_s: float) -> list[int] | None:
        """HiGHS on the model's arrays (see :meth:`solve`)."""
        cost, lower, upper, row_lower, row_upper, starts, index, value = arrays
        lp = highspy.HighsLp()
        lp.num_col_ = len(cost)
        lp.num_row_ = len(row_lower)
        lp.col_cost_ = cost
        lp.col_lower_ = lower
        lp.col_upper_ = upper
        lp.row_lower_ = row_lower
        lp.row_upper_ = row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        lp.integrality_ = [highspy.HighsVarType.kInteger] * lp.num_col_
        h = _HIGHS()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.setOptionValue("mip_rel_gap", 0.0)
        if time_limit_s < INF:
            h.setOptionValue("time_limit", float(time_limit_s))
        h.passModel(lp)
        h.run()
        status = h.getModelStatus()
        self.infeasible = status == highspy.HighsModelStatus.kInfeasible
        if status == highspy.HighsModelStatus.kTimeLimit:
            self.proven = False
            if h.getInfo().primal_solution_status != highspy.kSolutionStatusFeasible:
                return None
        elif status != highspy.HighsModelStatus.kOptimal:
            return None
        return [round(v) for v in h.getSolution().col_value]
