"""Progress of a long command, on stderr: a live bar on a terminal, and elsewhere (a log, a
pipe, CI) a line every :data:`LOG_EVERY_S` seconds, so a run of minutes is never silent. Both
estimate the time left from the rate so far."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

LOG_EVERY_S = 5.0

Update = Callable[..., None]  # update(done, total=None, **fields)


class _Fields(ProgressColumn):
    """``text`` formatted with the task's fields (``"{failed} failed"``)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def render(self, task: Task) -> Text:
        return Text(self.text.format(**task.fields))


@contextmanager
def progress(title: str, total: int, fields_text: str = "", every_s: float | None = None,
             **fields: Any) -> Iterator[Update]:
    """Yield ``update(done, total=None, **fields)``: how far ``title`` is, ``done`` of
    ``total``, with ``fields_text`` formatted with ``fields`` after it. On a terminal a live
    bar (gone when done); otherwise a line to stderr at most every ``every_s`` seconds
    (default :data:`LOG_EVERY_S`). Each ends with an estimate of the time left, at the rate
    so far (:func:`time_left_s` in a log)."""
    every_s = LOG_EVERY_S if every_s is None else every_s
    console = Console(stderr=True)
    if console.is_terminal:
        columns = (TextColumn(title), BarColumn(), MofNCompleteColumn(), _Fields(fields_text),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(title, total=total, **fields)

            def live(done: int, total: int | None = None, **now: Any) -> None:
                bar.update(task, completed=done, **({"total": total} if total else {}), **now)

            yield live
        return
    start = last = time.monotonic()
    state = {"total": total, **fields}

    def log(done: int, total: int | None = None, **now: Any) -> None:
        nonlocal last
        state.update(now, **({"total": total} if total else {}))
        t = time.monotonic()
        if t - last < every_s:
            return
        last = t
        extra = fields_text.format(**state)
        left = time_left_s(done, state["total"], t - start)
        print(f"{title}: {done}/{state['total']}{' ' + extra if extra else ''}, "
              f"{t - start:.0f} s elapsed{'' if left is None else f', about {left:.0f} s left'}",
              file=sys.stderr, flush=True)

    yield log


def time_left_s(done: int, total: int, elapsed_s: float) -> float | None:
    """The time the ``total - done`` still to do take at the rate so far; None before the
    first is done, or once all are."""
    if done <= 0 or done >= total:
        return None
    return elapsed_s * (total - done) / done
