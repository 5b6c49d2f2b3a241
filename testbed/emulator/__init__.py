"""The emulated backend: Mininet fabrics with shaped links and OVS switches, the controller
process, link and CPU sampling, calibration, the experiment runner, and the records and checks
that make sure a run removes everything it made and nothing else."""
