"""Shared by the real-time replay tests: a clock that only moves when slept on, and an engine
that finishes each collective when the model did."""

from __future__ import annotations


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


class ModelEngine:
    """Finishes each collective when the model's pass finished it (from the pass's start),
    plus ``late_s``; ``runner`` is set once the loop that releases to it exists."""

    def __init__(self, plan, late_s=0.0):
        self.plan, self.late_s, self.runner = plan, late_s, None

    def release(self, key):
        rec = self.plan.model.collectives[key]
        self.runner.finished(key, self.runner.start + float(rec.finished_ns) / 1e9 + self.late_s)
