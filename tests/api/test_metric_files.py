"""Under gunicorn a dead worker's counts are kept: its metric files stay in the folder and every scrape sums them."""
import os
import signal
import urllib.error
import urllib.request

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.apps import NO_RATE_LIMITS
from tests.support.processes import gunicorn, wait_for
from tests.support.workers import THREADED

# Each starts gunicorn (child processes, seconds each).
pytestmark = pytest.mark.slow

COUNTED = ("shiptrack_http_requests_total", "shiptrack_http_request_duration_seconds_bucket",
           "shiptrack_http_request_duration_seconds_count")


@pytest.fixture
def metrics_folder(tmp_path, monkeypatch):
    """An operator's PROMETHEUS_MULTIPROC_DIR for the gunicorn the test starts."""
    folder = tmp_path / "metrics"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    return folder


def scrape(base):
    """(counts, sums) of the request metrics in one GET /metrics."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=60) as response:
        text = response.read().decode()
    counts, sums = {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if sample.name in COUNTED:
                counts[key] = sample.value
            elif sample.name == "shiptrack_http_request_duration_seconds_sum":
                sums[key] = sample.value
    return counts, sums


def workers(base):
    """The pids of the gunicorn workers serving `base`."""
    bind = base.removeprefix("http://")
    found = [process for process in psutil.process_iter(["cmdline", "ppid"]) if bind in (process.info["cmdline"] or [])]
    pids = {process.pid for process in found}
    return {process.pid for process in found if process.info["ppid"] in pids}


def serve_some(base, token):
    for path, times in (("/organization", 5), ("/nowhere", 3)):
        for _ in range(times):
            request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
            try:
                urllib.request.urlopen(request, timeout=30).close()
            except urllib.error.HTTPError as error:
                assert error.code == 404
                error.close()


def files(folder):
    return sorted(path.name for path in folder.glob("*.db"))


def left_by(folder, killed):
    """The files the killed workers wrote (each a counter's and a histogram's)."""
    return sorted(name for name in files(folder) for pid in killed if name.endswith(f"_{pid}.db"))


@pytest.mark.parametrize("options", [(), THREADED], ids=["configured", "threaded"])
def test_a_killed_workers_counts_are_kept(demo_database, tmp_path, metrics_folder, options):
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    with gunicorn(demo_database.url, tmp_path, workers=2, options=options, RATE_LIMITS=NO_RATE_LIMITS) as base:
        serve_some(base, token)
        counts, sums = scrape(base)
        assert counts[("shiptrack_http_requests_total", (("method", "GET"), ("route", "/organization"),
                                                         ("status", "200")))] == 5
        killed = workers(base)
        assert len(killed) == 2
        written = left_by(metrics_folder, killed)
        assert written
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: len(workers(base) - killed) == 2, 30)
        assert scrape(base) == (counts, sums)
        assert left_by(metrics_folder, killed) == written
        # The new workers' counts add to the dead ones'.
        serve_some(base, token)
        counts, _sums = scrape(base)
        assert counts[("shiptrack_http_requests_total", (("method", "GET"), ("route", "/organization"),
                                                         ("status", "200")))] == 10
