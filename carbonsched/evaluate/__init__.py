"""Offline studies: replays of past days and job traces, site backtests, and their executors."""
