"""The fleet path with a real server: Debian's ``prometheus`` (installed by .ci/run) scrapes a live
``phasescope -a --metrics`` run on loopback, and the README's PromQL, run through Prometheus's HTTP
API, returns the phase changes per minute of the process whose phases alternate by construction."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from conftest import cli_command, wait_for

pytestmark = pytest.mark.slow

CHANGES_PER_MINUTE = "sum by (pid) (rate(phasescope_phase_changes_total[1m])) * 60"
TIMELINE = "max by (pid, thread) (phasescope_thread_phase)"
#: The README's third query sums by ``comm``, which the counters do not carry (``pid`` only): it
#: returns one series without ``comm``. This one takes ``comm`` from the thread series by ``pid``.
RESTLESS = ("topk(10, sum by (comm) (rate(phasescope_phase_changes_total[5m]) * on (pid) group_left (comm) "
            "group by (pid, comm) (phasescope_thread_phase)))")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(port: int, promql: str) -> list:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
    except OSError:
        return []
    return body["data"]["result"] if body.get("status") == "success" else []


def test_prometheus_runs_the_readmes_queries_on_a_live_system_wide_run(build, tmp_path):
    server = shutil.which("prometheus")
    if server is None:
        pytest.skip("prometheus (Debian's package) is not installed")
    exe = build("profiled.c", name="prom_phases")
    procs = []
    try:
        ps = subprocess.Popen(cli_command("-a", "--comm", "prom_phases", "--no-dashboard", "--metrics", "127.0.0.1:0",
                                          "-o", str(tmp_path / "out"), "--duration", "100"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(ps)
        metrics = re.search(r"serving metrics on http://(\S+?)/", ps.stderr.readline()).group(1)
        config = tmp_path / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: phasescope\n"
                          f"    static_configs:\n      - targets: ['{metrics}']\n")
        port = _free_port()
        procs.append(subprocess.Popen([server, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        target = subprocess.Popen([exe, "400000", "250", "1000"], stdout=subprocess.DEVNULL)
        procs.append(target)

        def changing():
            rows = [r for r in _query(port, CHANGES_PER_MINUTE) if r["metric"].get("pid") == str(target.pid)]
            return rows if rows and float(rows[0]["value"][1]) > 0 else None

        rows = wait_for(changing, 90, lambda: f"phase changes of pid {target.pid} in Prometheus: "
                        f"{_query(port, CHANGES_PER_MINUTE)}", every=1)
        assert float(rows[0]["value"][1]) > 1  # several a minute: the phases alternate every ~0.5 s of CPU
        assert any(r["metric"].get("pid") == str(target.pid) for r in _query(port, TIMELINE))
        assert any(r["metric"].get("comm") == "prom_phases" for r in _query(port, RESTLESS))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
