"""/openapi.json passes Redocly's recommended rules and Spectral's spectral:oas with no error and no warning."""
import json
import os
import subprocess

import pytest

from api.openapi import build_spec
from tests.support import ROOT

CI = ROOT / ".ci"
BIN = CI / "node" / "node_modules" / ".bin"
# The same commands and configurations as .ci/lint-openapi, which CI runs after `npm ci --prefix .ci/node`.
LINTERS = {
    "redocly": ["lint", "--config", str(CI / "redocly.yaml"), "--format=stylish"],
    "spectral": ["lint", "--ruleset", str(CI / ".spectral.yaml"), "--fail-severity=warn"],
}


@pytest.mark.slow
@pytest.mark.parametrize("linter", sorted(LINTERS))
def test_linter_finds_no_problem(app, tmp_path, linter):
    executable = BIN / linter
    if not executable.exists():
        pytest.skip(f"{linter} is not installed: run `npm ci --prefix .ci/node` (CI does)")
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(build_spec(app), indent=2))
    result = subprocess.run([str(executable), *LINTERS[linter], str(document)], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "REDOCLY_TELEMETRY": "off",
                                              "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"})
    assert result.returncode == 0, result.stdout + result.stderr
