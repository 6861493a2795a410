"""Workloads: job files, demo days built from real traces, and the job schema."""
