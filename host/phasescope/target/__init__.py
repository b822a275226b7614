"""Target-side signal sources: how phasescope observes a running process."""
