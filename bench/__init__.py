"""Benchmarks (`make bench`, `make bench-agent`); what they measured is in RESULTS.md."""
