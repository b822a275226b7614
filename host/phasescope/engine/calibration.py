"""``calibrate``: a per-program threshold, from the distances between the program's own intervals
(the tracker's module docstring says which distances; docs/quality.md, issue 28). A mixin of
:class:`phasescope.engine.tracker.Tracker`, which owns the threshold it sets."""

from __future__ import annotations

import numpy as np

from phasescope.engine import kmeans

CALIBRATION_WINDOW = 512  # interval-to-interval distances the calibrated threshold looks at


class Calibration:
    """The calibrated threshold's state and its update, one interval at a time."""

    def _init_calibration(self) -> None:
        c = self.config
        self._previous: dict = {}  # thread -> its last footprint (``calibrate`` on ``gap``)
        self._recent = np.zeros((CALIBRATION_WINDOW, c.buckets)) if c.calibrate_on != "gap" else None
        if c.calibrate_on == "kmeans":
            self._projection, self._rng = kmeans.projection_matrix(c.buckets), np.random.default_rng(kmeans.SEED)
        self._gaps = np.zeros(CALIBRATION_WINDOW)  # latest interval-to-interval distances, a ring
        self._gap_count = 0
        self.drifting = False  # ``drift_ratio``: the last re-clustering found a drift

    def _calibrate(self, fp: np.ndarray, thread: int) -> None:
        """``calibrate``: add this interval's distance (``calibrate_on``) to the window and set the
        threshold to ``calibrate`` x the window's ``calibrate_quantile``, within [threshold, threshold_max]."""
        c = self.config
        if c.calibrate_on == "kmeans":
            self._calibrate_on_clusters(fp)
            return
        if c.calibrate_on == "nearest":
            seen = min(self._clock - 1, CALIBRATION_WINDOW)
            gap = np.abs(self._recent[:seen] - fp).sum(axis=1).min() if seen else None
            self._recent[(self._clock - 1) % CALIBRATION_WINDOW] = fp
        else:
            prev = self._previous.get(thread)
            self._previous[thread] = fp
            gap = None if prev is None else np.abs(fp - prev).sum()
        if gap is None:
            return
        self._gaps[self._gap_count % CALIBRATION_WINDOW] = gap
        self._gap_count += 1
        level = float(np.quantile(self._gaps[: min(self._gap_count, CALIBRATION_WINDOW)], c.calibrate_quantile))
        low = c.threshold * self._scale  # the threshold wins over a lower cap
        self._threshold_units = float(np.clip(c.calibrate * level, low, max(low, c.threshold_max * self._scale)))

    def _calibrate_on_clusters(self, fp: np.ndarray) -> None:
        """``calibrate_on`` ``kmeans``: on re-clustering days (:func:`.kmeans.due`), ``calibrate`` x
        the spread of SimPoint's clusters of the last :data:`CALIBRATION_WINDOW` footprints. With
        ``drift_ratio``: when those footprints' median distance to the one before them is under
        ``drift_ratio`` x their median distance to their cluster's mean, the program stays within
        its clusters rather than jumping between them (a drift, or a flicker inside one behaviour,
        which k-means cuts into pieces), and the threshold is at least ``drift_floor``."""
        c = self.config
        self._recent[(self._clock - 1) % CALIBRATION_WINDOW] = fp
        seen = min(self._clock, CALIBRATION_WINDOW)
        if seen >= 2 and kmeans.due(self._clock, c.kmeans_every):
            window = self._recent[:seen]
            to_mean = kmeans.cluster_distances(window, self._projection, kmeans.MAX_K, self._rng)
            low = c.threshold * self._scale
            if c.drift_ratio:
                order = np.roll(window, -(self._clock % CALIBRATION_WINDOW), axis=0) if self._clock > seen else window
                gap = float(np.median(np.abs(np.diff(order, axis=0)).sum(axis=1)))
                self.drifting = gap < c.drift_ratio * float(np.median(to_mean))
                if self.drifting:
                    low = max(low, c.drift_floor * self._scale)
            spread = float(np.quantile(to_mean, c.calibrate_quantile))
            self._threshold_units = float(np.clip(c.calibrate * spread, low, max(low, c.threshold_max * self._scale)))
