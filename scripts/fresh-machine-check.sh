#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12 in a privileged container (root; about
# half an hour). See scripts/fresh_machine_check.py; not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/install.sh
exec .venv/bin/python scripts/fresh_machine_check.py "$@"
