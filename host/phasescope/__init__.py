"""phasescope: live program-phase tracking and prediction for native processes.

Data flow: session (Frida) -> wire (binary records -> numpy) -> modules (PC -> stable key)
-> engine (tracker -> predictors -> stats) -> sinks (dashboard, JSONL log, summary, BBV).
"""

__version__ = "0.1.0"
