"""Phase-labelled profiles of a recorded run (``phasescope profile``): the log's samples (or exact
mode's instructions) by phase, thread, process and call stack (:mod:`.model`), written as pprof,
speedscope, collapsed stacks or a Perfetto trace, and compared between two phases (:mod:`.diff`)."""
