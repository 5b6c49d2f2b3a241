#!/bin/sh
# fabriclab's job runner (testbed/vm/image.py): at boot, when the kernel command line says
# fabriclab.job, mount what the host shared, run its run.sh, keep the exit code, power off.
set -u
modprobe -a 9pnet_virtio 9p
share() { mkdir -p "$2" && mount -t 9p -o "trans=virtio,version=9p2000.L,msize=1048576$3" "$1" "$2"; }
share job /mnt/job "" || { echo "fabriclab-vm: no job share" > /dev/console; systemctl poweroff; exit 1; }
share src /mnt/src ",ro" 2>/dev/null || true
share wheels /mnt/wheels ",ro" 2>/dev/null || true
out=/mnt/job/out
say() { echo "$(date -u +%H:%M:%S) $*" >> "$out/progress.log"; }
say "booted: kernel $(uname -r), $(nproc) vCPUs"
# the archive is reached through QEMU's user-mode network; wait for its address
for _ in $(seq 60); do ip -4 route | grep -q '^default' && break; sleep 1; done
start=$(date +%s)
bash /mnt/job/run.sh > "$out/job.log" 2>&1
echo $? > "$out/exit-code.partial" && mv "$out/exit-code.partial" "$out/exit-code"
say "job ended with exit code $(cat "$out/exit-code") after $(( $(date +%s) - start )) s"
sync
systemctl poweroff
