"""The benchmarks: scripts run as modules from the repository root, e.g. ``python -m bench.live_bench``."""
