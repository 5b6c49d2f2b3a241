"""Trace loading (pandas), metrics and report rendering for fabriclab run directories.

``load_run(path)`` parses ``results/<run>/``; ``summarise(run)`` gives the stable summary
dict (``summary.json``); ``write_report(run_dirs, out_dir)`` renders HTML and Markdown.
Imports are lazy so that ``import analysis`` does not pull in matplotlib.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_run", "summarise", "write_report"]


def __getattr__(name: str) -> Any:
    if name == "load_run":
        from analysis.load import load_run
        return load_run
    if name == "summarise":
        from analysis.metrics import summarise
        return summarise
    if name == "write_report":
        from analysis.report import write_report
        return write_report
    raise AttributeError(name)
