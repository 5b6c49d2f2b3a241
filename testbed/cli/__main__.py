"""``python -m testbed.cli ...`` runs the same command line as ``fabriclab ...``."""

import sys

from testbed.cli import main

sys.exit(main())
