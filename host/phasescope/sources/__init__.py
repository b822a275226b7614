"""The signal sources (one interface: :mod:`phasescope.sources.protocol`): exact mode's agent
session, sampled mode's kernel session, the device and target, the agent's wire format, modules,
symbols and code."""
