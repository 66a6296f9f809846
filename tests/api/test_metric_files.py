"""Dead workers' metric files are merged under gunicorn: no count is lost and a scrape stays fast after 2,000 deaths."""
import math
import os
import shutil
import signal
import time
import urllib.error
import urllib.request

import psutil
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from api import metrics
from tests.support.apps import NO_RATE_LIMITS
from tests.support.processes import gunicorn, wait_for
from tests.support.workers import THREADED

# Each starts gunicorn (child processes, seconds each).
pytestmark = pytest.mark.slow

COUNTED = ("shiptrack_http_requests_total", "shiptrack_http_request_duration_seconds_bucket",
           "shiptrack_http_request_duration_seconds_count")
# No process has a pid this high (Linux's pid_max is at most 2**22): files of processes long dead.
DEAD_PIDS = range(2**23, 2**23 + 2000)


@pytest.fixture
def metrics_folder(tmp_path, monkeypatch):
    """An operator's PROMETHEUS_MULTIPROC_DIR for the gunicorn the test starts."""
    folder = tmp_path / "metrics"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    return folder


def scrape(base):
    """(counts, sums) of the request metrics in one GET /metrics, and the seconds it took."""
    started = time.perf_counter()
    with urllib.request.urlopen(f"{base}/metrics", timeout=60) as response:
        text = response.read().decode()
    seconds = time.perf_counter() - started
    counts, sums = {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if sample.name in COUNTED:
                counts[key] = sample.value
            elif sample.name == "shiptrack_http_request_duration_seconds_sum":
                sums[key] = sample.value
    return counts, sums, seconds


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


def merged_only(folder, killed):
    """The killed workers' files merged and gone; what else is there is the new workers' (a worker makes its
    histogram's file as it loads the application, before any request: seen only if the check is slower)."""
    names = files(folder)
    return ({"counter_merged.db", "histogram_merged.db"} <= set(names)
            and not any(f"_{pid}.db" in name for pid in killed for name in names))


@pytest.mark.parametrize("options", [(), THREADED], ids=["configured", "threaded"])
def test_a_killed_workers_counts_are_merged_and_its_files_removed(demo_database, tmp_path, metrics_folder, options):
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    with gunicorn(demo_database.url, tmp_path, workers=2, options=options, RATE_LIMITS=NO_RATE_LIMITS) as base:
        serve_some(base, token)
        counts, sums, _seconds = scrape(base)
        assert counts[("shiptrack_http_requests_total", (("method", "GET"), ("route", "/organization"),
                                                         ("status", "200")))] == 5
        killed = workers(base)
        assert len(killed) == 2
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: len(workers(base) - killed) == 2, 30)
        assert wait_for(lambda: merged_only(metrics_folder, killed), 10), files(metrics_folder)
        assert scrape(base)[:2] == (counts, sums)
        # The new workers' counts add to the merged ones; their deaths merge again.
        serve_some(base, token)
        counts, _sums, _seconds = scrape(base)
        assert counts[("shiptrack_http_requests_total", (("method", "GET"), ("route", "/organization"),
                                                         ("status", "200")))] == 10
        assert len(files(metrics_folder)) > 2
        killed = workers(base)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: merged_only(metrics_folder, killed), 30), files(metrics_folder)
        assert scrape(base)[0] == counts


def test_a_scrape_after_2000_worker_deaths_reads_few_files_and_the_same_counts(demo_database, tmp_path,
                                                                                metrics_folder):
    token = demo_database.headers["Authorization"].removeprefix("Bearer ")
    with gunicorn(demo_database.url, tmp_path, workers=1, RATE_LIMITS=NO_RATE_LIMITS) as base:
        serve_some(base, token)
        scrape(base)
        # Each dead worker's files: the keys a live worker wrote, every count 1 (prometheus_client's own format).
        for kind in ("counter", "histogram"):
            [live] = metrics_folder.glob(f"{kind}_[0-9]*.db")
            sample = MmapedDict(str(tmp_path / f"{kind}.sample"))
            for key, _value, _timestamp, _position in MmapedDict.read_all_values_from_file(str(live)):
                sample.write_value(key, 1.0, 0.0)
            sample.close()
            for pid in DEAD_PIDS:
                shutil.copyfile(tmp_path / f"{kind}.sample", metrics_folder / f"{kind}_{pid}.db")
        before, sums_before, _seconds = scrape(base)
        for pid in DEAD_PIDS:
            metrics.merge_dead_process(pid, str(metrics_folder))
        assert len(files(metrics_folder)) == 4  # the live worker's two, the merged two
        after, sums_after, seconds = scrape(base)
    assert after == before
    assert sums_after.keys() == sums_before.keys()
    assert all(math.isclose(sums_after[key], sums_before[key]) for key in sums_before)
    assert seconds < 1  # 2 to 4 s when the 4,000 files were read at each scrape
