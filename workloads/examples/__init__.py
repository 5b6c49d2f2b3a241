"""Programs for ``command`` jobs (:mod:`testbed.emulator.commands`): real framework jobs that
follow the iteration-log convention (:mod:`workloads.iteration_log`)."""
