"""Workloads that ship with phasescope (the demo target)."""
