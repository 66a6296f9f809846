"""deploy/prometheus/alerts.yml: valid for Prometheus (`promtool check rules`) and firing as its unit tests say."""
import shutil
import subprocess

import pytest

from tests.support import ROOT

RULES = ROOT / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian's prometheus package) is not installed")


@pytest.mark.parametrize("command", [["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]])
def test_promtool_accepts_the_rules(command):
    result = subprocess.run([PROMTOOL, *command], cwd=RULES, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
