#!/usr/bin/env bash
# Install what fabriclab needs on Debian 12, idempotently: apt packages, the .venv,
# the project itself, and the Open vSwitch daemons. Safe to run again.
# Usage: scripts/install.sh [--test]   (--test adds the tools only the tests need)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(mininet openvswitch-switch python3-os-ken python3-venv python3-pip
              iperf3 ethtool iputils-ping iproute2 psmisc procps make
              docker.io debootstrap)  # container hosts: the engine, and the base image
# Only `make test` needs these.
TEST_APT_PACKAGES=(vagrant strace)  # strace: the safety tests watch every signal clean sends
[ "${1:-}" = "--test" ] && APT_PACKAGES+=("${TEST_APT_PACKAGES[@]}")
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
