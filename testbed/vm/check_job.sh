# The fresh-machine check, run as root inside the stock-kernel VM (testbed/vm/check.py boots
# it). Each stage's exit code and wall time go to out/stages.jsonl; facts to out/facts.json.
set -u
# (copy_checkout and SRC come from copy_checkout.sh, which job_script puts before this file)
OUT=/mnt/job/out
say() { echo "$(date -u +%H:%M:%S) $*" >> "$OUT/progress.log"; }
stage() {  # stage NAME COMMAND...: run it, log it to out/NAME.log, record rc and seconds
    local name=$1 t0 rc
    shift
    say "stage $name: $*"
    t0=$EPOCHREALTIME
    "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    awk -v n="$name" -v rc="$rc" -v t0="$t0" -v t1="$EPOCHREALTIME" 'BEGIN {
        printf "{\"stage\": \"%s\", \"exit_code\": %d, \"seconds\": %.1f}\n", n, rc, t1 - t0 }' \
        >> "$OUT/stages.jsonl"
    say "stage $name: exit code $rc"
    return $rc
}

# The wheels of scripts/requirements.lock, downloaded by the host (this VM reaches the Debian
# archive, not necessarily the Python registry the host uses); install.sh checks every hash.
install() { cd "$SRC" && PIP_NO_INDEX=1 PIP_FIND_LINKS=/mnt/wheels bash scripts/install.sh --test; }

facts() {
    local netem=false ovs_module=false numerics=false virt
    modprobe sch_netem 2>/dev/null && tc qdisc add dev lo root netem delay 1ms 2>/dev/null \
        && tc qdisc del dev lo root && netem=true
    modprobe openvswitch 2>/dev/null && [ -d /sys/module/openvswitch ] && ovs_module=true
    # the guest CPU sorts and groups as numpy and pandas expect (testbed/vm/numerics.py)
    (cd "$SRC" && .venv/bin/python -m testbed.vm.numerics --rounds 50) && numerics=true
    virt=$(systemd-detect-virt 2>/dev/null || echo none)
    printf '{"kernel": "%s", "netem": %s, "openvswitch_module": %s, "numerics": %s, ' \
        "$(uname -r)" "$netem" "$ovs_module" "$numerics" > "$OUT/facts.json"
    printf '"virt": "%s", "cpu": "%s", "cpus": %d}\n' "$virt" \
        "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)" \
        >> "$OUT/facts.json"
    cat "$OUT/facts.json"
    "$SRC/.venv/bin/fabriclab" doctor
}

smoke() {
    cd "$SRC" && .venv/bin/python -m pytest -q -p no:cacheprovider -o addopts="" \
        --junitxml="$OUT/smoke.xml" $SMOKE_TESTS
}

routing_demo() {
    cd "$SRC" && .venv/bin/fabriclab run experiments/demo.yaml --variants ecmp,vclos \
        --repeats 1 --out /root/results || return $?
}

collect() {  # the routing runs' records and the report, for vm-check.json
    mkdir -p "$OUT/results"
    for d in /root/results/*/; do
        mkdir -p "$OUT/results/$(basename "$d")"
        for f in summary.json fidelity.json env.json report.md headlines.json; do
            [ -f "$d$f" ] && cp "$d$f" "$OUT/results/$(basename "$d")/"
        done
    done
    return 0
}

stage copy copy_checkout || exit 1
stage install install || exit 1
stage facts facts
stage smoke smoke
stage routing routing_demo
stage collect collect
exit 0
