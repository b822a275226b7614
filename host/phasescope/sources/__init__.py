"""The traced process: Frida device and session, the agent's wire format, modules, symbols and code."""
