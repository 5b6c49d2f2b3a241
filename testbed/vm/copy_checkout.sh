# The guest's copy of the checkout the host shares at /mnt/src (read-only), as `git archive`
# would give it: no venv, results, .git, install stamp or bytecode; root's, not writable by
# others (fabriclab refuses a checkout another user could change). The top of the run.sh of
# `vm check` and of `vm run` (testbed/vm/check.py guest_script).
SRC=/root/fabriclab
copy_checkout() {
    mkdir -p "$SRC"
    tar -C /mnt/src --exclude=./.venv --exclude=./results --exclude=./.git \
        --exclude=./.install-stamp --exclude='*/__pycache__' -cf - . | tar -C "$SRC" -xf -
    chown -R root:root "$SRC" && chmod -R go-w "$SRC"
}
