"""Quality of phases and predictions against an offline reference (issue 10).

- :mod:`.simpoint`: the offline reference, SimPoint's method (random projection, k-means over
  k = 1..K, k chosen by BIC) on phasescope's own basic-block vectors.
- :mod:`.labels`: reference labels in and out (SimPoint ``-saveLabels`` files, phasescope logs).
- :mod:`.metrics`: the scores (Sherwood, Sair & Calder, ISCA 2003, Figure 6 and more).
"""
