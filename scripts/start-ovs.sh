#!/usr/bin/env bash
# Start the Open vSwitch daemons if they are not running (idempotent).
# Userspace TSO must be on before ovs-vswitchd starts: with the userspace (netdev)
# datapath, TCP through a bridge is otherwise slow or broken (see shared/DESIGN.md).
set -euo pipefail
OVS_CTL=/usr/share/openvswitch/scripts/ovs-ctl
[ "$(id -u)" -eq 0 ] || { echo "start-ovs: needs root (run with sudo)" >&2; exit 1; }
[ -x "$OVS_CTL" ] || { echo "start-ovs: Open vSwitch is not installed (run scripts/install.sh)" >&2; exit 1; }

# The kernel datapath where the module exists; nothing to do otherwise (netdev is used).
modprobe -q openvswitch 2>/dev/null || true

# This machine's own daemons, by the pidfiles in their run directory: never by name, since
# stand-in servers (`fabriclab servers local`) run daemons of the same names beside them.
running() {
    local pidfile=/var/run/openvswitch/$1.pid pid
    [ -r "$pidfile" ] || return 1
    pid=$(cat "$pidfile" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$1" ]
}

# The daemons outlive this script, so they get none of the files it was handed: started as
# `flock LOCK bash scripts/start-ovs.sh`, they would otherwise keep LOCK locked while they run.
# (Bash's own fd 255, the script, is close-on-exec already.)
no_inherited_fds() {
    local fd
    for fd in $(ls /proc/$$/fd); do
        case $fd in 0|1|2|255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
    done
}
no_inherited_fds

if ! running ovsdb-server; then
    "$OVS_CTL" start --no-ovs-vswitchd --system-id=random >/dev/null
fi
tso=$(ovs-vsctl --timeout=5 get Open_vSwitch . other_config:userspace-tso-enable 2>/dev/null || echo none)
if [ "$tso" != '"true"' ]; then
    ovs-vsctl --no-wait --timeout=5 set Open_vSwitch . other_config:userspace-tso-enable=true
    if running ovs-vswitchd; then
        "$OVS_CTL" stop --no-ovsdb-server >/dev/null  # restart so the setting takes effect
    fi
fi
if ! running ovs-vswitchd; then
    "$OVS_CTL" start --no-ovsdb-server --system-id=random >/dev/null
fi
ovs-vsctl --timeout=5 show >/dev/null
# Without the kernel module, ovs-vswitchd's main thread forwards every packet. At its default
# nice -10 it still waited for a CPU behind the run's workers (a woken thread waits out the
# running one's time slice): real-time priority 1 lets it take a CPU at once. Only that thread
# (its TID is the PID in the pidfile). A thread inherits its creator's policy, and the main
# thread makes handler, revalidator and cleaner threads anew whenever bridges change (every
# run): --reset-on-fork starts them on the normal policy. Threads an earlier start made
# real-time without that flag are put back on the normal policy.
forwarding="normal"
if [ ! -d /sys/module/openvswitch ]; then
    main=$(cat /var/run/openvswitch/ovs-vswitchd.pid)
    chrt --rr --reset-on-fork --pid 1 "$main"
    for task in /proc/"$main"/task/*; do
        tid=${task##*/}
        if [ "$tid" != "$main" ] && chrt --pid "$tid" 2>/dev/null | grep -q 'SCHED_\(RR\|FIFO\)'; then
            chrt --other --pid 0 "$tid" 2>/dev/null || true  # it may have ended meanwhile
        fi
    done
    forwarding="real-time"
fi
# The userspace datapath sends every packet out of every port through one AF_PACKET socket,
# made at its first send with the machine's default send buffer (net.core.wmem_default, 208 KiB
# on Debian). A packet waiting in a port's shaped queue counts against that one buffer; once the
# queues of all ports hold about that much, a send fails and ovs-vswitchd drops the packet,
# counted nowhere but as netdev_received minus netdev_sent in coverage/show. Four ECMP jobs
# on 10 Mbit/s links lost 1.5-2.9 MB per leaf that way (BENCHMARKS.md, "The loss invariant").
# So the socket is made here, with a larger buffer: the default is raised only until a
# throwaway bridge has sent one packet, then put back.
TX_SNDBUF=${FABRICLAB_OVS_SNDBUF:-67108864}  # benchmarks/ovs_send_buffer.py sets it to compare
tx_sndbuf() {  # the send buffer of ovs-vswitchd's unbound packet socket, or 0
    ss -0 -m -p 2>/dev/null | grep 'ovs-vswitchd' | grep -F '[0]:*' | grep -o 'tb[0-9]*' \
        | head -1 | tr -d tb | grep . || echo 0
}
if [ ! -d /sys/module/openvswitch ] && [ "$(tx_sndbuf)" -lt "$TX_SNDBUF" ]; then
    if [ "$(tx_sndbuf)" -gt 0 ]; then  # made small by an earlier start: start afresh
        "$OVS_CTL" stop --no-ovsdb-server >/dev/null
        "$OVS_CTL" start --no-ovsdb-server --system-id=random >/dev/null
        exec bash "$0" "$@"  # and set the forwarding thread up again
    fi
    for name in fl-warm fl-warm0 fl-warm1; do
        if ip link show "$name" >/dev/null 2>&1; then
            echo "start-ovs: an interface named $name exists; not making the send socket" >&2
            exit 1
        fi
    done
    old=$(sysctl -n net.core.wmem_default)
    cleanup_warm() {
        sysctl -qw net.core.wmem_default="$old"
        ovs-vsctl --timeout=5 --if-exists del-br fl-warm || true
        ip link del fl-warm0 2>/dev/null || true
    }
    trap cleanup_warm EXIT
    trap 'exit 1' INT TERM HUP  # a signal ends the script through the EXIT trap
    sysctl -qw net.core.wmem_default="$TX_SNDBUF"
    ip link add fl-warm0 type veth peer name fl-warm1
    ip link set fl-warm0 up
    ip link set fl-warm1 up
    ovs-vsctl --timeout=5 add-br fl-warm -- set bridge fl-warm datapath_type=netdev \
        -- add-port fl-warm fl-warm0 -- set interface fl-warm0 ofport_request=1
    frame="ffffffffffff02000000000188b5$(printf '00%.0s' $(seq 46))"
    for _ in $(seq 50); do
        ovs-ofctl packet-out fl-warm LOCAL output:1 "$frame" 2>/dev/null || true
        [ "$(tx_sndbuf)" -gt 0 ] && break
        sleep 0.1
    done
    cleanup_warm
    trap - EXIT
fi
sndbuf=$(tx_sndbuf)
echo "start-ovs: ovsdb-server and ovs-vswitchd running (userspace TSO on, forwarding thread $forwarding, send buffer $((sndbuf / 1048576)) MiB)"
