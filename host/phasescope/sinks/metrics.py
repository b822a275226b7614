"""Prometheus/OpenMetrics exposition (``--metrics HOST:PORT``): what operators already scrape.

Served by prometheus_client's own HTTP server on a thread, loopback only unless
``--metrics-allow-remote`` (the rule of ``--events``). The live loop updates a few numbers per
interval under a lock; a scrape reads them, and the engine's predictor scores, through a custom
collector, so nothing is computed for a scrape that nobody makes. Series (``pid`` on each):

- ``phasescope_thread_phase{comm,thread}``: the phase of the thread's last interval;
- ``phasescope_thread_predicted_phase{comm,thread}``, ``phasescope_thread_prediction_confidence{comm,thread}``;
- ``phasescope_intervals_total``, ``phasescope_phase_changes_total``, ``phasescope_new_phases_total``;
- ``phasescope_phases`` (distinct phase IDs seen);
- system-wide (``-a``): ``pid`` is each series' own process, ``comm`` its command name, and at most
  :data:`MAX_SERIES` threads and processes (the most recently active) have series;
- ``phasescope_prediction_accuracy{predictor,kind}`` (kind: overall, changes, steady);
- ``phasescope_dropped_records_total``, ``phasescope_lost_samples_total`` (counters, from the last
  checkpoint); with ``-a`` these and the accuracy are the machine's, without ``pid``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from typing import Optional, Tuple

from phasescope.errors import InputError
from phasescope.sinks.base import Sink
from phasescope.sinks.events import parse_address

MAX_SERIES = 1024  # threads and processes with series of their own (the most recently active)
MAX_ANSWERING = 64  # scrapes answered at once (more wait for one to end)
ANSWER_S = 1.0  # at close, how long the scrapes being answered get to be written


class MetricsServer(Sink):
    """Serve the run's metrics on ``host:port``; binds in the constructor (a bad address or a port
    in use is one line, exit 2, before the target is touched)."""

    watched = True  # its clients read the run as it goes

    def __init__(self, address: str, allow_remote: bool = False):
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InputError(f"--metrics {address!r}: give HOST:PORT, e.g. 127.0.0.1:9100 (port 0: any free port)")
        _, host, port, _ = parse_address(f"tcp:{address}", allow_remote, option="--metrics")
        self._lock = threading.Lock()
        self._pid: str = ""  # the traced process ("" with -a: series of the whole machine carry no pid)
        self._comm: str = ""
        #: thread -> (pid label, comm, phase, prediction, confidence); pid label -> counts
        #: both bounded (least recently updated first out): system-wide, processes come and go
        self._threads: "OrderedDict[int, Tuple[str, str, int, Optional[int], Optional[float]]]" = OrderedDict()
        self._counts: "OrderedDict[str, dict]" = OrderedDict()
        self._dropped = self._lost = 0
        self.engine = None
        registry = CollectorRegistry()
        registry.register(self)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise InputError(f"--metrics {address}: cannot serve: {e.strerror or e}") from None
        self._server.handle_error = self._client_error
        self._answering = threading.Semaphore(MAX_ANSWERING)  # scrapes whose answer is being made or sent
        self._server.set_app(self._counted(self._server.get_app()))
        self.address = f"[{host}]:{self._server.server_port}" if ":" in host else f"{host}:{self._server.server_port}"

    def _client_error(self, request, client_address) -> None:
        """A scraper that hung up while its request was read (a reset, a timeout) is no error of
        the run's: the server would print its traceback on phasescope's stderr. Anything else is
        printed, as the server does."""
        if not isinstance(sys.exc_info()[1], OSError):
            type(self._server).handle_error(self._server, request, client_address)

    def _counted(self, app):
        """``app`` (prometheus_client's WSGI app), holding one of :attr:`_answering` from a whole
        request's arrival until its answer is written (the server calls the body's ``close``)."""
        def counted(environ, start_response):
            self._answering.acquire()
            try:
                return _Answer(app(environ, start_response), self._answering.release)
            except BaseException:
                self._answering.release()
                raise
        return counted

    def prepare(self, engine) -> None:
        self.engine = engine

    def on_start(self, info: dict) -> None:
        self._pid = "" if info.get("pid") is None else str(info["pid"])
        self._comm = info.get("comm") or ""

    def on_interval(self, result, interval) -> None:
        pid = self._pid if interval.pid is None else str(interval.pid)  # -a: each interval's process
        with self._lock:
            self._threads[result.thread] = (pid, interval.comm or self._comm, result.phase, result.prediction,
                                            result.confidence)
            self._threads.move_to_end(result.thread)
            counts = self._counts.get(pid)
            if counts is None:
                counts = self._counts[pid] = {"intervals": 0, "changes": 0, "new": 0, "phases": set()}
            self._counts.move_to_end(pid)
            counts["intervals"] += 1
            counts["changes"] += result.phase_changed
            counts["new"] += result.new_phase
            counts["phases"].add(result.phase)
            for table in (self._threads, self._counts):
                while len(table) > MAX_SERIES:
                    table.popitem(last=False)

    def on_checkpoint(self, summary: dict) -> None:
        session = summary.get("session") or {}
        with self._lock:
            self._dropped = int(session.get("dropped_records") or 0)
            self._lost = int(session.get("lost_samples") or 0)

    on_end = on_checkpoint

    def collect(self):
        """The metric families of one scrape (prometheus_client's collector protocol)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        with self._lock:
            threads = dict(self._threads)
            counts = {cpid: {**c, "phases": len(c["phases"])} for cpid, c in self._counts.items()}
            dropped, lost = self._dropped, self._lost
        pid = self._pid
        labels = ["pid", "comm", "thread"]
        phase = GaugeMetricFamily("phasescope_thread_phase", "Phase ID of the thread's last interval", labels=labels)
        predicted = GaugeMetricFamily("phasescope_thread_predicted_phase", "Shown prediction of the thread's "
                                      "next phase", labels=labels)
        confidence = GaugeMetricFamily("phasescope_thread_prediction_confidence", "Confidence in that prediction "
                                       "(0..1)", labels=labels)
        for tid, (tpid, comm, p, nxt, conf) in sorted(threads.items()):
            phase.add_metric([tpid, comm, str(tid)], p)
            if nxt is not None:
                predicted.add_metric([tpid, comm, str(tid)], nxt)
            if conf is not None:
                confidence.add_metric([tpid, comm, str(tid)], conf)
        yield from (phase, predicted, confidence)
        for name, key, text in (("phasescope_intervals", "intervals", "Intervals classified"),
                                ("phasescope_phase_changes", "changes", "Phase changes of a thread"),
                                ("phasescope_new_phases", "new", "New phase IDs")):
            c = CounterMetricFamily(name, text, labels=["pid"])
            for cpid, cc in sorted(counts.items()) or [(pid, {key: 0})]:
                c.add_metric([cpid], cc[key])
            yield c
        distinct = GaugeMetricFamily("phasescope_phases", "Distinct phase IDs seen", labels=["pid"])
        for cpid, cc in sorted(counts.items()) or [(pid, {"phases": 0})]:
            distinct.add_metric([cpid], cc["phases"])
        yield distinct
        run = ["pid"] if pid else []  # -a: the run's own series are the machine's, with no pid
        for name, value, text in (("phasescope_dropped_records", dropped, "Interval records the agent dropped"),
                                  ("phasescope_lost_samples", lost, "Samples the kernel lost")):
            c = CounterMetricFamily(name, text, labels=run)
            c.add_metric([pid] if pid else [], value)
            yield c
        accuracy = GaugeMetricFamily("phasescope_prediction_accuracy", "Next-phase prediction accuracy so far",
                                     labels=run + ["predictor", "kind"])
        board = self.engine.scoreboard.to_dict() if self.engine is not None else {}
        for predictor, kinds in board.items():
            for kind, score in kinds.items():
                if score["accuracy"] is not None:
                    accuracy.add_metric(([pid] if pid else []) + [predictor, kind], score["accuracy"])
        yield accuracy

    def close(self) -> None:
        """Stop serving; a scrape being answered gets up to :data:`ANSWER_S` to be written whole (the
        server's threads are daemons: the process's end would cut it, and an empty or partial answer
        reads as a run with no series). A client that never finished its request is not waited for."""
        self._server.shutdown()
        deadline = time.monotonic() + ANSWER_S
        for _ in range(MAX_ANSWERING):
            if not self._answering.acquire(timeout=max(0.0, deadline - time.monotonic())):
                break
        self._server.server_close()


class _Answer:
    """A WSGI body that says when the server has written it (``close``, which WSGI servers call)."""

    def __init__(self, body, done):
        self.body, self.done = body, done

    def __iter__(self):
        return iter(self.body)

    def close(self) -> None:
        self.done()
