"""Subcommands: one small class each on a shared runner (signals, start and stop, exit codes)."""
