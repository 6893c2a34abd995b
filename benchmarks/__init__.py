"""Benchmarks (run with ``python -m benchmarks`` or one module, e.g. ``python -m benchmarks.log_summary``)."""
