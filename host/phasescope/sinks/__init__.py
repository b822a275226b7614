"""Where classified intervals go: the interval log, the summary, SimPoint .bb, the event stream."""
