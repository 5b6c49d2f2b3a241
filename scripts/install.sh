#!/usr/bin/env bash
# Install what fabriclab needs on Debian 12, idempotently: apt packages, the .venv,
# the project itself, and the Open vSwitch daemons. Safe to run again.
# Usage: scripts/install.sh [--test] [--vm]   (--test adds the tools only the tests need,
#        --vm what booting the stock-kernel VM needs: make vm-check)
set -euo pipefail
cd "$(dirname "$0")/.."

# One home for the package lists: scripts/packages/ (the VM image is built from them too).
packages() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "scripts/packages/$1" | tr -d ' \t'; }
mapfile -t APT_PACKAGES < <(packages apt.txt)
for arg in "$@"; do
    case $arg in
        --test) list=apt-test.txt ;;
        --vm) list=apt-vm.txt ;;
        *) echo "install: unknown option $arg (give --test and/or --vm)" >&2; exit 2 ;;
    esac
    mapfile -t -O "${#APT_PACKAGES[@]}" APT_PACKAGES < <(packages "$list")
done
VENV=.venv
STAMP=.install-stamp

is_root() { [ "$(id -u)" -eq 0 ]; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if ! is_root; then
        echo "install: missing Debian packages (${missing[*]}); run this again as root" >&2
        exit 1
    fi
    echo "install: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv comes from Debian's interpreter so that it sees Mininet and os-ken.
if [ ! -x "$VENV/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
# Every dependency from the lock, each at its version and checked against its hashes (the lock
# is made by pip-compile from pyproject.toml: its header has the command); then fabriclab
# itself, with nothing more, built by the venv's own setuptools (no download).
LOCK=scripts/requirements.lock
want=$(cat pyproject.toml "$LOCK" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "install: pip install --require-hashes -r $LOCK, then -e . into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$LOCK"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
    echo "$want" > "$STAMP"
fi

# `fabriclab` on root's PATH and on Debian's sudo PATH: a link to this checkout's wrapper,
# made only where nothing stands, or where a link to another fabriclab checkout's wrapper
# (or to one since deleted) stands; anything else is left alone.
LINK=/usr/local/bin/fabriclab
ours() {  # $1: a link's target; true if it is a fabriclab checkout's bin/fabriclab
    case "$1" in */bin/fabriclab) ;; *) return 1 ;; esac
    local checkout; checkout="$(dirname "$(dirname "$1")")"
    [ ! -e "$1" ] || grep -qs '^name = "fabriclab"' "$checkout/pyproject.toml"
}
if is_root; then
    target="$PWD/bin/fabriclab"
    if [ -L "$LINK" ] && ours "$(readlink "$LINK")"; then
        [ "$(readlink "$LINK")" = "$target" ] || ln -sfn "$target" "$LINK"
    elif [ ! -e "$LINK" ] && [ ! -L "$LINK" ]; then
        ln -s "$target" "$LINK"
    else
        echo "install: $LINK exists and is not fabriclab's; left alone (use $target)" >&2
    fi
fi

if is_root; then
    bash scripts/start-ovs.sh
else
    echo "install: not root, Open vSwitch not started (root tests will be skipped)" >&2
fi
