"""A small mixed-integer program builder over HiGHS (``highspy``), solved to optimality.

Variables are added with bounds and a cost, rows as sparse ``{variable: coefficient}``
with lower and upper bounds; :meth:`Milp.solve` minimises and returns the integer values
of every variable, or None when the program is infeasible.
"""

from __future__ import annotations

import math

import highspy
import numpy as np

INF = math.inf


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
        runs out: the best solution found by then (:attr:`proven` False), or None."""
        self.proven, self.infeasible = True, False
        if not self.cost:
            return []
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.cost)
        lp.num_row_ = len(self.row_lower)
        lp.col_cost_ = np.array(self.cost, dtype=np.float64)
        lp.col_lower_ = np.array(self.lower, dtype=np.float64)
        lp.col_upper_ = np.array(self.upper, dtype=np.float64)
        lp.row_lower_ = np.array(self.row_lower, dtype=np.float64)
        lp.row_upper_ = np.array(self.row_upper, dtype=np.float64)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(self.row_starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(self.row_index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(self.row_value, dtype=np.float64)
        lp.integrality_ = [highspy.HighsVarType.kInteger] * lp.num_col_
        h = highspy.Highs()
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
