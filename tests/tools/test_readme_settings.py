"""The README's settings block runs top to bottom, as written, on a fresh database: each line exits 0."""
import os
import re
import subprocess

from tests.support import ROOT

README = ROOT / "README.md"


def settings_block():
    """The lines of the ```sh block under the README's "Settings" heading."""
    section = README.read_text().split("\n### Settings", 1)[1]
    block = re.search(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_settings_block_runs_in_order_on_a_fresh_database(database_url):
    lines = settings_block()
    assert len(lines) >= 8 and all(line.startswith(".venv/bin/flask --app app ") for line in lines), lines
    environment = {**os.environ, "DATABASE_URL": database_url}
    outputs = []
    for line in lines:
        result = subprocess.run(["bash", "-c", line], cwd=ROOT, env=environment, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        outputs.append(result.stdout)
    # The token the block creates is the one it lists and revokes.
    created = next(output for line, output in zip(lines, outputs) if " tokens create " in line)
    assert re.fullmatch(r"sv_[A-Za-z0-9]{40}\n", created)
    listed = next(output for line, output in zip(lines, outputs) if " tokens list " in line)
    assert "tok_1" in listed and "BI export" in listed
