"""File formats phasescope reads and writes: the JSON Lines interval log and SimPoint .bb."""
