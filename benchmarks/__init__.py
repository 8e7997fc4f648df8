"""Benchmark harness for tracegraph. Entry point: benchmarks/run.py."""
