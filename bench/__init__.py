"""Benchmarks: figures printed, never asserted (see bench/README.md)."""
