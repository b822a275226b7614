"""A Perfetto trace (``.perfetto-trace``, protos/perfetto/trace/trace.proto) of a run's phases:
a track per thread (grouped by process), a slice per run of one phase on it (``phase N``), an
instant at each phase change, and two counter tracks per thread, the predicted next phase and
its confidence, set at the end of each interval. Track events only (TrackDescriptor +
TrackEvent), on one packet sequence; timestamps are the log's wall clock (ns). A log without
processes (not ``-a``) puts its threads in one process, numbered by its lowest thread id."""

from __future__ import annotations

from itertools import groupby
from typing import Dict, List, Optional

from phasescope.profiles import protobuf as pb
from phasescope.profiles.model import Profile, Span

SEQ = 1
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4


def _packet(body: bytes, ts: Optional[int] = None) -> bytes:
    return pb.blob(1, (pb.uint(8, ts) if ts is not None else b"") + pb.uint(10, SEQ) + body)


def _track(uuid: int, parent: int = 0, name: str = "", process: bytes = b"", thread: bytes = b"",
           counter: bool = False) -> bytes:
    body = pb.uint(1, uuid) + (pb.uint(5, parent) if parent else b"") + (pb.text(2, name) if name else b"")
    body += (pb.blob(3, process) if process else b"") + (pb.blob(4, thread) if thread else b"")
    body += pb.blob(8, b"") if counter else b""
    return _packet(pb.blob(60, body))


def _event(ts: int, kind: int, track: int, name: str = "", value: Optional[float] = None) -> bytes:
    body = pb.uint(9, kind) + pb.uint(11, track) + (pb.text(23, name) if name else b"")
    if value is not None:
        body += pb.double(44, value)
    return _packet(pb.blob(11, body), ts)


def encode(prof: Profile) -> bytes:
    spans = [s for s in prof.spans if s.end_ns]
    out: List[bytes] = [pb.blob(1, pb.uint(10, SEQ) + pb.uint(13, 1))]  # SEQ_INCREMENTAL_STATE_CLEARED
    lowest = min((s.thread for s in spans), default=0)
    uuid = iter(range(1, 1 << 62))
    processes: Dict[int, int] = {}
    keyed = sorted(spans, key=lambda s: (s.pid, s.thread, s.start_ns))
    for (pid, thread), group in groupby(keyed, key=lambda s: (s.pid, s.thread)):
        group = list(group)
        real_pid = pid or lowest
        if real_pid not in processes:
            processes[real_pid] = next(uuid)
            out.append(_track(processes[real_pid], process=pb.uint(1, real_pid) +
                              (pb.text(6, group[0].comm) if group[0].comm else b"")))
        track, predicted, confidence = next(uuid), next(uuid), next(uuid)
        out.append(_track(track, processes[real_pid], thread=pb.uint(1, real_pid) + pb.uint(2, thread)
                          + pb.text(5, f"{group[0].comm or 'thread'} {thread}")))
        out.append(_track(predicted, track, f"predicted phase {thread}", counter=True))
        out.append(_track(confidence, track, f"confidence {thread}", counter=True))
        out.extend(_thread_events(group, track, predicted, confidence))
    return b"".join(out)


def _thread_events(spans: List[Span], track: int, predicted: int, confidence: int) -> List[bytes]:
    out = []
    start = spans[0].start_ns or spans[0].end_ns
    for phase, run in groupby(spans, key=lambda s: s.phase):
        run = list(run)
        begin = max(start, run[0].start_ns or start)
        if out:
            out.append(_event(begin, _INSTANT, track, f"phase change to {phase}"))
        out.append(_event(begin, _BEGIN, track, f"phase {phase}"))
        for s in run:
            if s.prediction is not None:
                out.append(_event(s.end_ns, _COUNTER, predicted, value=float(s.prediction)))
            if s.confidence is not None:
                out.append(_event(s.end_ns, _COUNTER, confidence, value=float(s.confidence)))
        start = max(begin, run[-1].end_ns)
        out.append(_event(start, _END, track))
    return out


def write(prof: Profile, path: str, phase: Optional[int] = None) -> None:
    """The whole run's timeline (``phase`` does not apply: a trace shows every phase in time)."""
    with open(path, "wb") as f:
        f.write(encode(prof))
