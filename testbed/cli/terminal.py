"""The console every command prints its tables and lines with: on a terminal, the terminal's
width; piped or logged, wide enough that no table is cut or squeezed (rich would otherwise
assume 80 columns), unless ``COLUMNS`` says otherwise."""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPED_WIDTH = 1000  # columns: more than any table fabriclab prints; rich never pads to it


def out_console() -> Console:
    """A console on stdout, as wide as the terminal or, piped, :data:`PIPED_WIDTH`."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=PIPED_WIDTH) if piped else Console()
