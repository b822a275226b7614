"""What every sampled session shares (:class:`~phasescope.sources.kernel_session.KernelSession`,
:class:`~phasescope.sources.sampled_session.SampledSession`): the sampling defaults, the one check
of ``--rate`` and ``--window``, and how a sampled source states its mode, losses and settings."""

from __future__ import annotations

from phasescope.errors import InputError
from phasescope.sources.events import Dropped

#: 1000 Hz of CPU time. perf's default is 4000 Hz, but each sample costs the target ~15 us on this
#: (virtualised) machine, measured with perf itself too: 4000 Hz cost 3-28%, 1000 Hz <= ~3%
#: (bench/sampled_overhead.py). On bare metal (~1-3 us a sample) 4000 Hz fits the 3% budget.
DEFAULT_PERIOD_NS = 1_000_000
#: 100 samples (0.1 s of CPU at 1000 Hz): fine enough to see phases of a few tenths of a second;
#: the sampling noise between two windows of one phase (~0.2-0.5 of the interval at 100 samples,
#: bench/sampled_noise.py) is what the ``sampled`` tracker preset's noise term absorbs.
DEFAULT_WINDOW_SAMPLES = 100
MAX_RATE_HZ = 100_000
MIN_WINDOW_SAMPLES = 10


def check_sampling(rate_hz: float, window_samples: int) -> None:
    """The one check of the sampling options (``--rate``, ``--window``): InputError, one line."""
    if not 1 <= rate_hz <= MAX_RATE_HZ:
        raise InputError(f"--rate must be from 1 to {MAX_RATE_HZ} samples per second (got {rate_hz:g})")
    if window_samples < MIN_WINDOW_SAMPLES:
        raise InputError(f"--window must be at least {MIN_WINDOW_SAMPLES} samples (got {window_samples})")


class SampledSource:
    """What every sampled session says the same way; it has ``sampler`` (None until started),
    ``rate_hz``, ``window_samples`` and ``kernel``."""

    mode = "sampled"

    @property
    def dropped(self) -> Dropped:
        """Sample records the kernel lost (its ring was full); no instruction count is known."""
        return Dropped(self.sampler.lost if self.sampler else 0, 0)

    def describe_mode(self) -> str:
        return f"sampled {self.rate_hz} Hz"

    def sampled_info(self) -> dict:
        """The sampling part of what the summary records of how the program was seen."""
        s = self.sampler
        return {"mode": "sampled", "rate_hz": self.rate_hz, "period_ns": 10**9 // self.rate_hz,
                "window_samples": self.window_samples, "interval": None, "samples": s.samples if s else 0,
                "lost_samples": s.lost if s else 0, "kernel": self.kernel,
                "kernel_samples": s.kernel_samples if s else 0, "stacks": bool(s and s.stacks),
                "leaf_only_samples": s.leaf_only if s else 0}
