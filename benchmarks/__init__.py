"""Benchmark harness for tracegraph (issue 6). Entry point: benchmarks/run.py."""
