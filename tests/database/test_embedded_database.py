"""The embedded PostgreSQL default: several processes starting it at once all get its database."""
import subprocess
import sys

from tests.support import ROOT

# Each process asks for the embedded server of one fresh data folder and prints the URL it got.
ASK = """
import sys
sys.path.insert(0, {root!r})
from models import db
print(db.embedded_database_url(data_dir={data!r}, database="shiptrack"))
"""


def test_processes_starting_the_embedded_database_at_once_all_get_it(tmp_path):
    data = str(tmp_path / "pg")
    script = ASK.format(root=str(ROOT), data=data)
    processes = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
    results = [process.communicate(timeout=120) for process in processes]
    assert [(process.returncode, err.count("Traceback")) for process, (_out, err) in zip(processes, results)] \
        == [(0, 0)] * 4, [err for _out, err in results]
    assert {out.strip() for out, _err in results} == {f"postgresql://postgres:@/shiptrack?host={data}"}
