"""--metrics on a real run: a scrape parses with Prometheus's own text parser and shows the run's
phases and phase changes; a non-loopback address is refused without --metrics-allow-remote."""

from __future__ import annotations

import pytest
import re
import subprocess
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import cli_command, end_process, run_cli, wait_for



def scrape(url: str) -> dict:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {s.name + str(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.slow  # starts a real process
def test_a_scrape_of_a_live_run_shows_its_phases_and_changes(build, tmp_path):
    exe = build("phased.c")
    proc = subprocess.Popen(cli_command("--no-dashboard", "--metrics", "127.0.0.1:0", "-o", str(tmp_path / "out"),
                                        "--duration", "30", "-f", exe, "0", "2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"serving metrics on (\S+)", proc.stderr.readline()).group(1)

        def changed_thrice():
            seen = scrape(url)
            changes = [v for k, v in seen.items() if k.startswith("phasescope_phase_changes_total")]
            return seen if changes and changes[0] >= 3 else None
        seen = wait_for(changed_thrice, 60, lambda: f"3 phase changes in a scrape; the last: {scrape(url)}", every=0.5)
        phases = {v for k, v in seen.items() if k.startswith("phasescope_thread_phase[")}
        assert phases and all(v >= 0 for v in phases)
        assert any(k.startswith("phasescope_prediction_accuracy") for k in seen)
        assert [v for k, v in seen.items() if k.startswith("phasescope_phases[")][0] >= 2
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        subprocess.run(["pkill", "-f", exe], timeout=300)


@pytest.mark.slow  # starts a real process
def test_a_remote_address_needs_its_own_flag(tmp_path):
    r = run_cli("--metrics", "8.8.8.8:9100", "-f", "/bin/true")
    assert r.returncode == 2 and "--metrics-allow-remote" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # starts a real process
def test_a_scrape_of_a_system_wide_run_names_each_process(build, tmp_path):
    exe = build("sampled_two.c", name="two_metrics")
    proc = subprocess.Popen(cli_command("-a", "--comm", "two_metrics", "--no-dashboard", "--metrics", "127.0.0.1:0",
                                        "-o", str(tmp_path / "out"), "--duration", "40"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target = None
    try:
        url = re.search(r"serving metrics on (\S+)", proc.stderr.readline()).group(1)
        target = subprocess.Popen([exe, "400000000"], stdout=subprocess.DEVNULL)
        label = f"('pid', '{target.pid}')"

        def changed():
            seen = scrape(url)
            return seen if any(k.startswith("phasescope_phase_changes_total") and label in k and v >= 1
                               for k, v in seen.items()) else None
        seen = wait_for(changed, 60, lambda: f"a phase change of pid {target.pid}; the last: {scrape(url)}", every=0.5)
        assert any(k.startswith("phasescope_thread_phase[") and "('comm', 'two_metrics')" in k and label in k
                   for k in seen), seen
        assert not [k for k in seen if "('pid', '')" in k]  # the machine's own series carry no empty pid
    finally:
        if target is not None:
            end_process(target)
        proc.terminate()
        proc.wait(timeout=60)


def test_a_scraper_that_hangs_up_mid_request_prints_no_traceback(capfd):
    """A client reset while the server read its request: socketserver printed the
    ConnectionResetError's traceback on phasescope's stderr (seen with a scraper cut off as a run
    ended). The next scrape is served."""
    import socket
    import struct
    import time
    from phasescope.sinks.metrics import MetricsServer
    server = MetricsServer("127.0.0.1:0")
    try:
        host, port = server.address.rsplit(":", 1)
        for _ in range(3):
            c = socket.create_connection((host, int(port)), timeout=5)
            c.sendall(b"GET /metr")
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()  # a reset, not an end of file
        assert "phasescope_intervals_total" in str(scrape(f"http://{server.address}/metrics"))
        time.sleep(0.3)  # the reset requests' threads are done by now
    finally:
        server.close()
    assert capfd.readouterr().err == ""


def test_a_scrape_being_answered_as_the_run_ends_is_answered_whole(monkeypatch):
    """The server's threads are daemons: close() returned while a scrape was still being answered,
    and the process's end cut the answer off (seen: an empty 200, which reads as a run with no
    series). close() now waits for it (bounded; 10 s here, so a loaded machine cannot fail it)."""
    import threading
    import time
    from phasescope.sinks import metrics
    from phasescope.sinks.metrics import MetricsServer
    monkeypatch.setattr(metrics, "ANSWER_S", 10.0, raising=False)
    server = MetricsServer("127.0.0.1:0")
    order, got = [], {}
    server._lock.acquire()  # the scrape's collect waits here: an answer in the making
    client = threading.Thread(target=lambda: got.update(body=urllib.request.urlopen(
        f"http://{server.address}/metrics", timeout=30).read()))
    client.start()

    def begun() -> bool:  # the answer is being made (before the fix nothing tells: 0.5 s)
        answering = getattr(server, "_answering", None)
        return time.sleep(0.5) or True if answering is None else answering._value < metrics.MAX_ANSWERING
    wait_for(begun, 30, "the scrape's answer begun")

    def release():
        order.append("released")
        server._lock.release()
    threading.Timer(0.8, release).start()
    server.close()
    order.append("closed")
    client.join(10)
    assert order == ["released", "closed"]
    assert b"phasescope_intervals_total" in got["body"]
