"""The phase database (``--phase-db FILE``): phase IDs that mean the same code in every run.

Footprints are made from ASLR-stable block keys, so a representative saved by one run matches
the same code in the next. The database is loaded in the constructor (before the target is
touched): a file made with other tracker settings, or a corrupt or truncated one, is refused
(InputError, exit 2) and left untouched. Its representatives are preloaded into the tracker
(:meth:`phasescope.engine.tracker.Tracker.preload`), so the same code gets the same phase ID and
the summary marks those phases ``known``; at the end the run's representatives are merged in and
the file is replaced atomically (temporary file in the same directory, then ``os.replace``). A
phase the run folded into another (``merged_into``) counts as that phase and leaves the file; a
known phase keeps its ID when it folds with a new one (engine/folds.py ``_fold``), and a phase that
has folded another in keeps ``folded_spread`` (its spread, footprint units), so that later runs
make no new phase within ``FOLDED_REACH`` x it either (``overlap``). ``retired`` keeps the
representatives of the phases runs retired (``retire``, the newest ``RETIRED_KEPT``): a later run
makes no new phase within the threshold of one, so a short-lived phase's code takes no new ID each run.

Format (JSON)::

    {"format": "phasescope-phase-db", "version": 1,
     "settings": {"buckets": 32, "bits": 6, "scale": 32.0, "threshold": 0.1, "interval": 10000000,
                  "update_policy": "none", "method": "table", "projection": false, "hash": "mix64"},
     "runs": 2, "next_id": 9,
     "representatives": [{"phase": 0, "footprint": [...], "intervals": 40, "instructions": ...,
                          "first_seen_run": 1, "last_seen_run": 2, "top_code": [key, ...]}, ...]}

With ``--locality``, a phase's entry also keeps ``locality_runs``: one per run that measured it,
``{"run", "input_size" (bytes), "input_size_from" ("given": --input-size, or "windows": the data
its windows touched), "windows", "accesses", "touched_bytes" (the data the phase's windows touched),
"signature" [[cache blocks, miss rate], ...],
"top_code" [{"key", "share", "symbol"}]}``: what ``phasescope locality-model`` fits.

A run holds the database from its load to its save: a second run given the same file at once is
refused (one line, exit 2). Both had loaded the same phases and handed out the same new IDs to
different code, and the second save replaced the first's (its phases lost, ``runs`` counted once).
The lock is ``flock`` on ``.NAME.lock`` beside the file (a FIFO or a device is not locked), removed
at the end. ``-a`` locks each program's database the same way, once for all its processes: a second
``-a`` run (or a ``--phase-db`` run on that file) does without it, saying so. Within one ``-a`` run,
each of a program's processes merges into the file as the ones that ended before it saved it: a
phase new to two of them is saved under two IDs, and none is lost.

``runs`` counts the runs saved into it; ``first_seen_run``/``last_seen_run`` are run numbers. The
page tracker's (``"method": "pages"``, sampled mode) representatives are sparse,
``[[bucket, weight], ...]``, and ``code_shift`` keeps the code granularity it chose.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import sys
import tempfile
from typing import Dict, Optional

from phasescope import waits
from phasescope.engine.config import PRESETS, TrackerConfig, preset
from phasescope.engine.folds import RETIRED_KEPT
from phasescope.engine.phase_engine import EngineConfig
from phasescope.engine.stats import final_ids
from phasescope.errors import InputError
from phasescope.sinks.base import Sink, write_json_atomically, written_in_place

FORMAT = "phasescope-phase-db"
VERSION = 1
SETTINGS = ("buckets", "bits", "scale", "threshold", "interval", "update_policy", "method", "projection")
#: what a database saved before a setting existed had
OLD_DEFAULTS = {"method": "table", "projection": False}


def settings_of(config: EngineConfig) -> dict:
    """The tracker settings a representative's meaning depends on."""
    return settings_of_tracker(config.tracker)


def settings_of_tracker(tracker: TrackerConfig) -> dict:
    """:func:`settings_of` for a tracker setting alone."""
    t = tracker.to_dict()
    return {**{k: t[k] for k in SETTINGS}, "hash": "mix64"}


class PhaseDb(Sink):
    """Load, preload into the engine, merge and save a phase database."""

    def __init__(self, path: str, config: EngineConfig, input_size: Optional[int] = None, lock: bool = True):
        """``lock``: hold the database for the run (see the module docstring); ``-a`` opens one per
        process of a program in one run, and holds it itself, once per program."""
        self.path = path
        self.input_size = input_size  # --input-size (bytes); None: the data the windows touched
        self.settings = settings_of(config)
        self._dir = os.path.dirname(os.path.realpath(path))  # where it is written (a link's file's)
        if os.path.isdir(path):
            raise InputError(f"--phase-db {path}: is a directory")
        #: a database whose mode allows no writing is used as it is: loaded, never saved
        self.read_only = os.path.exists(path) and not os.stat(path).st_mode & 0o222
        self._lock = None if self.read_only or not lock or written_in_place(path) else hold_lock(path)
        self._shared = not lock  # -a: the program's other processes in this run may save before this one
        try:
            self.db = self._load()
        except BaseException:
            self.close()
            raise
        if self.read_only:
            print(f"phasescope: --phase-db {path} is read-only: its phases are used, this run's are not saved",
                  file=sys.stderr, flush=True)
            self.engine = None
            return
        # fail now if the directory is not writable, not after the work
        try:
            fd, tmp = tempfile.mkstemp(prefix=".phasescope-db-", suffix=".tmp", dir=self._dir)
        except OSError as e:
            raise InputError(f"--phase-db {path}: cannot write: {e.strerror}") from None
        os.close(fd)
        os.unlink(tmp)
        self.engine = None

    # -- loading ----------------------------------------------------------------------------------

    def _load(self) -> dict:
        try:
            with waits.interruptible(), open(self.path, "rb") as f:  # a FIFO waits for a writer: a stop signal ends it
                raw = f.read()
        except FileNotFoundError:
            return {"format": FORMAT, "version": VERSION, "settings": self.settings, "runs": 0, "next_id": 0,
                    "representatives": []}
        except OSError as e:
            raise InputError(f"--phase-db {self.path}: cannot read: {e.strerror}") from None
        bad = f"--phase-db {self.path}: not a valid phasescope phase database"
        try:
            db = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise InputError(f"{bad} ({e.__class__.__name__}: {str(e)[:80]}); left unchanged") from None
        if not isinstance(db, dict) or db.get("format") != FORMAT or not isinstance(db.get("settings"), dict):
            raise InputError(f"{bad} (no format marker or settings); left unchanged")
        def differs(k, v):  # a replay keeping the recorded intervals (None) fits any interval
            old = db["settings"].get(k, OLD_DEFAULTS.get(k))
            return old != v and not (k == "interval" and (old is None or v is None))
        diff = ", ".join(f"{k} {db['settings'].get(k)!r} (now {v!r})" for k, v in self.settings.items() if differs(k, v))
        if diff:
            named = [n for n in sorted(PRESETS) if n != "default" and not any(  # a preset it fits, any interval
                differs(k, v) for k, v in settings_of_tracker(preset(n)).items() if k != "interval")]
            hint = f"it fits --tracker {named[0]}" if named else "use the same settings"
            raise InputError(f"--phase-db {self.path}: made with other tracker settings: {diff}; "
                             f"{hint}, or another database")
        why = self._invalid(db)
        if why:
            raise InputError(f"{bad} ({why}); left unchanged")
        return db

    def _invalid(self, db) -> Optional[str]:
        """Why ``db`` is not a well-formed database, None if it is."""
        if not isinstance(db, dict) or db.get("format") != FORMAT:
            return "no format marker"
        if db.get("version") != VERSION:
            return f"version {db.get('version')!r}, expected {VERSION}"
        if not isinstance(db.get("settings"), dict):
            return "no settings"
        for k in ("runs", "next_id"):
            if not isinstance(db.get(k), int) or db[k] < 0:
                return f"bad {k}"
        reps = db.get("representatives")
        if not isinstance(reps, list):
            return "no representatives"
        seen = set()
        for i, r in enumerate(reps):
            if not isinstance(r, dict) or not isinstance(r.get("phase"), int) or r["phase"] < 0:
                return f"representative {i}: bad phase"
            if not self._valid_footprint(r.get("footprint")):
                return f"representative {i}: bad footprint"
            if r["phase"] in seen or r["phase"] >= db["next_id"]:
                return f"representative {i}: duplicate phase or phase >= next_id"
            seen.add(r["phase"])
            spread = r.get("folded_spread", 0)
            if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 0 <= spread < math.inf:
                return f"representative {i}: bad folded_spread"
            why = _invalid_locality_runs(r.get("locality_runs", []))
            if why:
                return f"representative {i}: {why}"
        retired = db.get("retired", [])
        if not isinstance(retired, list) or not all(self._valid_footprint(r) for r in retired):
            return "bad retired"
        return None

    def _valid_footprint(self, fp) -> bool:
        """A table tracker's footprint is ``buckets`` numbers; the page tracker's is sparse,
        ``[[bucket, weight], ...]``."""
        n = self.settings["buckets"]
        number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        if not isinstance(fp, list):
            return False
        if self.settings["method"] == "pages":
            return all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and 0 <= e[0] < n
                       and number(e[1]) for e in fp)
        return len(fp) == n and all(number(x) for x in fp)

    # -- the sink -----------------------------------------------------------------------------------

    def prepare(self, engine) -> None:
        self.engine = engine
        reps = sorted(self.db["representatives"], key=lambda r: (-r.get("intervals", 0), r["phase"]))
        pages = {"shift": self.db.get("code_shift")} if self.settings["method"] == "pages" else {}
        folded = {r["phase"]: r["folded_spread"] for r in reps if "folded_spread" in r}
        if folded:  # only the table tracker's ``overlap`` saves them
            pages["folded"] = folded
        if self.db.get("retired"):  # only the table tracker's ``retire`` saves them
            pages["retired"] = self.db["retired"]
        engine.tracker.preload([(r["phase"], r["footprint"]) for r in reps], self.db["next_id"], **pages)

    def summary_sections(self) -> dict:
        return {"phase_db": {"path": self.path, "saved": self.engine is not None and not self.read_only}}

    def on_end(self, summary: dict) -> None:
        if self.engine is None or self.read_only:
            return
        loaded, saved = self.db, self._saved_by_this_run()
        # IDs this process handed out after its load: past those its siblings saved, never the same ID twice
        shift = saved["next_id"] - loaded["next_id"] if saved else 0
        new_id = lambda phase: phase + shift if phase >= loaded["next_id"] else phase
        base = saved or loaded
        run = base["runs"] if saved else base["runs"] + 1
        by_phase: Dict[int, dict] = {r["phase"]: r for r in base["representatives"]}
        stats = {p["phase"]: p for p in summary.get("phases", [])}
        # a phase folded into another (--full-policy merge) counts as the phase it ended up in
        final = final_ids({p["phase"]: p["merged_into"] for p in stats.values() if p.get("merged_into") is not None})
        folded: Dict[int, list] = {}
        table = self.engine.tracker.table()
        spreads = getattr(self.engine.tracker, "folded_spreads", dict)()
        for gone, kept in final.items():
            folded.setdefault(kept, []).append(stats[gone])
            if any(e["phase"] == kept for e in table):  # its code is that phase's now: not preloaded again
                by_phase.pop(new_id(gone), None)
        for entry in table:
            phase = entry["phase"]
            p = stats.get(phase)
            if p is None:
                continue  # preloaded and not seen in this run: keep the saved entry as is
            r = by_phase.get(new_id(phase))
            if r is None:
                r = by_phase[new_id(phase)] = {"phase": new_id(phase), "intervals": 0, "instructions": 0,
                                               "first_seen_run": run}
            r["footprint"] = entry["representative"]
            if phase in spreads:  # it has folded another in: the next run makes no phase beside it
                r["folded_spread"] = spreads[phase]
            counted = [p] + folded.get(phase, [])
            r["intervals"] = r.get("intervals", 0) + sum(q["intervals"] for q in counted)
            r["instructions"] = r.get("instructions", 0) + sum(q["instructions"] or 0 for q in counted)  # None: sampled
            r["last_seen_run"] = run
            r["top_code"] = [b["key"] for b in p.get("top_code", [])[:8]]
            signature = self._signature(summary, p, run)
            if signature is not None:
                r.setdefault("locality_runs", []).append(signature)
        self.db = {"format": FORMAT, "version": VERSION, "settings": self.settings, "runs": run,
                   "next_id": max(base["next_id"], new_id(self.engine.tracker.next_id)),
                   "representatives": sorted(by_phase.values(), key=lambda r: r["phase"])}
        retired = base.get("retired", []) + getattr(self.engine.tracker, "retired_representatives", list)()
        if retired:  # short-lived phases retired: the next run makes no new ID for their code either
            self.db["retired"] = retired[-RETIRED_KEPT:]
        if self.settings["method"] == "pages":  # the page tracker's code granularity, kept for the next run
            self.db["code_shift"] = self.engine.tracker.shift
        self._save()

    def _saved_by_this_run(self) -> Optional[dict]:
        """-a: the database as another process of the program saved it since this one loaded it
        (the run holds the program's lock, so no other run can have), None if none did. Merging
        into it keeps that process's phases, which a save of this one's load replaced (stop 47)."""
        if not self._shared or written_in_place(self.path):
            return None
        try:
            current = self._load()
        except InputError:
            return None
        return current if current["runs"] != self.db["runs"] else None

    def _signature(self, summary: dict, p: dict, run: int) -> Optional[dict]:
        """--locality: the phase's reuse signature in this run, with the run's input size (see
        :mod:`phasescope.engine.locality_model`); None when the phase has none."""
        loc = p.get("locality")
        if not loc or not loc.get("windows") or not loc.get("signature"):
            return None
        given = self.input_size is not None
        size = self.input_size if given else summary["whole"].get("locality_touched_bytes")
        if not size:
            return None
        return {"run": run, "input_size": int(size), "input_size_from": "given" if given else "windows",
                "windows": loc["windows"], "accesses": loc["accesses"], "touched_bytes": loc.get("touched_bytes", 0),
                "signature": loc["signature"],
                "top_code": [{k: b.get(k) for k in ("key", "share", "symbol")} for b in p.get("top_code", [])[:8]]}

    def _save(self) -> None:
        write_json_atomically(self.path, self.db, ".phasescope-db-")

    def close(self) -> None:
        lock, self._lock = self._lock, None
        release_lock(lock)


def release_lock(lock: Optional[tuple]) -> None:
    """Give back what :func:`hold_lock` returned (None: nothing held): the lock file goes."""
    if lock is not None:
        lock_path, fd = lock
        with contextlib.suppress(OSError):
            os.unlink(lock_path)  # still held: a run waiting on this file sees it gone and makes its own
        os.close(fd)


def hold_lock(path: str) -> tuple:
    """Hold ``path``'s database for this run: ``(lock file, its fd)``, with this pid in it; InputError
    (exit 2) naming the run that holds it. A lock file removed by its holder between our open and our
    lock is not the one in place: open again. ``-a`` holds each program's database once, for all
    its processes (:class:`phasescope.pipeline.processes.ProcessEngines`)."""
    real = os.path.realpath(path)
    lock_path = os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.lock")
    while True:
        try:
            # not through a link: it would truncate the file it names and write our pid there
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise InputError(f"--phase-db {path}: its lock file {lock_path} is a symbolic link: remove it") from None
            raise InputError(f"--phase-db {path}: cannot write: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise InputError(f"--phase-db {path}: in use by another phasescope run"
                             + (f" (pid {holder})" if holder.isdigit() else "")
                             + ": two runs at once would hand out the same new phase IDs and one would lose the "
                               "other's; wait for it to end, or give another database") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return lock_path, fd
        os.close(fd)


def _invalid_locality_runs(runs) -> Optional[str]:
    """Why a representative's ``locality_runs`` is malformed, None if it is well formed."""
    if not isinstance(runs, list):
        return "bad locality_runs"
    for run in runs:
        if not isinstance(run, dict) or not isinstance(run.get("input_size"), int) or run["input_size"] <= 0:
            return "bad locality_runs input_size"
        if not isinstance(run.get("touched_bytes", 0), int) or run.get("touched_bytes", 0) < 0:
            return "bad locality_runs touched_bytes"
        sig = run.get("signature")
        if not isinstance(sig, list) or not all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and e[0] > 0
                and isinstance(e[1], (int, float)) and not isinstance(e[1], bool) and 0 <= e[1] <= 1 for e in sig):
            return "bad locality_runs signature"
    return None


def read_locality_runs(path: str) -> dict:
    """A phase database read for ``locality-model``: ``{phase: {"instructions", "runs": [locality_runs
    entries]}}`` of the phases that have reuse signatures, and ``runs`` (the database's count).
    InputError (one line) on a missing, corrupt or malformed file."""
    bad = f"{path}: not a valid phasescope phase database"
    try:
        with waits.interruptible(), open(path, "rb") as f:  # a FIFO waits for a writer: a stop signal ends it
            db = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{bad} ({e.__class__.__name__}: {str(e)[:80]})") from None
    if not isinstance(db, dict) or db.get("format") != FORMAT or not isinstance(db.get("representatives"), list):
        raise InputError(f"{bad} (no format marker or representatives)")
    phases = {}
    for i, r in enumerate(db["representatives"]):
        if not isinstance(r, dict) or not isinstance(r.get("phase"), int):
            raise InputError(f"{bad} (representative {i}: bad phase)")
        why = _invalid_locality_runs(r.get("locality_runs", []))
        if why:
            raise InputError(f"{bad} (representative {i}: {why})")
        if r.get("locality_runs"):
            phases[r["phase"]] = {"instructions": r.get("instructions", 0), "runs": r["locality_runs"]}
    return {"runs": db.get("runs", 0), "phases": phases}
