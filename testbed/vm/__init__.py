"""The stock-kernel Debian VM: its image (image), booting a throwaway copy that runs one job
(machine), the fresh-machine check inside it (check) and the Vagrant box made from it (box)."""
