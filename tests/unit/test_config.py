"""Settings: one commented table, read in one order (defaults, DATABASE_URL, SHIPTRACK_*, overrides)."""
import ast
import dataclasses
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

import config
from config import DEFAULTS, load_config
from delivery.__main__ import read_settings
from delivery.settings import Settings
from tests.support import ROOT


@pytest.fixture
def environ(monkeypatch):
    """Set process environment variables for one test, none of DATABASE_URL and SHIPTRACK_* left from outside."""
    for name in [name for name in os.environ if name.startswith("SHIPTRACK_") or name == "DATABASE_URL"]:
        monkeypatch.delenv(name)

    def set_variables(**variables):
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    return set_variables


# The checkout's top-level modules and packages.
PROJECT = {path.stem for path in ROOT.glob("*.py")} | {path.parent.name for path in ROOT.glob("*/*.py")}


def imports_of(path):
    """The top-level names a module imports (anywhere in it, a function's own imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names


def imported(package):
    """{path: imports_of(path)} for every module of `package`."""
    return {path: imports_of(path) for path in (ROOT / package).rglob("*.py")}


def test_defaults_alone(environ):
    values = load_config()
    assert values == DEFAULTS
    values["RATE_LIMITS"]["per_token"] = 1
    assert DEFAULTS["RATE_LIMITS"]["per_token"] == 600, "a caller's change must not reach the table"


def test_without_the_environment_no_variable_is_read(environ):
    environ(DATABASE_URL="postgresql:///a", SHIPTRACK_SMTP_PORT="2525")
    assert load_config(environment=False) == DEFAULTS
    assert load_config({"SMTP_PORT": 26}, environment=False)["SMTP_PORT"] == 26


@pytest.mark.parametrize("text, value", [
    ("32", 32), ("2.5", 2.5), ("true", True), ("null", None), ('["10.0.0.0/8"]', ["10.0.0.0/8"]),
    ("mail.example", "mail.example"), ("", ""), ("[not json", "[not json"),
])
def test_variables_are_json_when_they_parse(environ, text, value):
    environ(SHIPTRACK_SMTP_HOST=text)
    assert load_config()["SMTP_HOST"] == value


def test_nested_variable_sets_one_key_of_a_dict(environ):
    environ(SHIPTRACK_RATE_LIMITS__per_token="5")
    values = load_config()
    assert values["RATE_LIMITS"] == {**DEFAULTS["RATE_LIMITS"], "per_token": 5}
    assert DEFAULTS["RATE_LIMITS"]["per_token"] == 600


def test_order_defaults_database_url_variables_overrides(environ):
    environ(DATABASE_URL="postgresql:///a", SHIPTRACK_SMTP_PORT="2525")
    assert load_config()["DATABASE_URL"] == "postgresql:///a"
    assert load_config()["SMTP_PORT"] == 2525
    environ(SHIPTRACK_DATABASE_URL="postgresql:///b")
    assert load_config()["DATABASE_URL"] == "postgresql:///b"
    values = load_config({"DATABASE_URL": "postgresql:///c", "SMTP_PORT": 26, "lower": 1})
    assert (values["DATABASE_URL"], values["SMTP_PORT"]) == ("postgresql:///c", 26)
    assert "lower" not in values, "as Flask's from_mapping, only upper-case keys"


def test_an_empty_database_url_is_none(environ):
    environ(DATABASE_URL="")
    assert load_config()["DATABASE_URL"] is None


def test_config_imports_nothing_of_the_project():
    # Every module may read the settings (gunicorn.conf.py does, for its logger): one imported here would be a circle.
    names = imports_of(Path(config.__file__))
    assert {"logs", "models", "api", "delivery", "rendering"} <= PROJECT
    assert names and not names & PROJECT


def loaded_by(code):
    """The modules a new interpreter has loaded after running `code` from the checkout's root."""
    code += "; import sys; print('\\n'.join(sorted(sys.modules)))"
    return set(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.split())


# The delivery script (`python -m delivery` runs delivery/__main__.py) and what it reads its settings and
# writes its log lines with: neither the web framework nor the web server.
@pytest.mark.parametrize("module", ["config", "logs", "delivery.__main__"])
def test_imports_no_web_framework(module):
    loaded = loaded_by(f"import {module}")
    assert module in loaded
    assert not {"flask", "werkzeug", "gunicorn"} & loaded


def test_every_setting_has_a_comment():
    tree = ast.parse(Path(config.__file__).read_text())
    lines = Path(config.__file__).read_text().splitlines()
    (table,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "DEFAULTS"]
    for key in table.keys:
        assert lines[key.lineno - 2].strip().startswith("#"), f"{key.value} has no comment line above it"


def test_settings_carry_no_default():
    for field in dataclasses.fields(Settings):
        assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING, field.name


def test_delivery_settings_from_the_table():
    settings = Settings.from_config(load_config({"DATABASE_URL": "postgresql:///x"}, environment=False))
    assert (settings.workers, settings.per_endpoint, settings.lease, settings.pass_seconds) == (
        128, 16, timedelta(minutes=5), 45.0)
    assert (settings.smtp_host, settings.smtp_port, settings.smtp_from) == (None, 25, "webhooks@shiptrack.example")
    assert (settings.allowed_networks, settings.ca_bundle, settings.service_domain) == ((), None, "shiptrack.example")


def test_delivery_script_reads_variables(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql:///from-env")
    monkeypatch.setenv("SHIPTRACK_WEBHOOK_PER_ENDPOINT", "3")
    monkeypatch.setenv("SHIPTRACK_WEBHOOK_LEASE_SECONDS", "90")
    settings = read_settings()
    assert (settings.database_url, settings.per_endpoint, settings.lease) == (
        "postgresql:///from-env", 3, timedelta(seconds=90))


def test_delivery_script_builds_no_app():
    """`python -m delivery` renders through rendering/ and imports nothing of api/, app.py or the CLI."""
    loaded = loaded_by("import delivery.__main__")
    assert {"delivery.outbox", "rendering.shipment_renderings", "rendering.schemas.shipments"} <= loaded
    assert not [name for name in loaded if name.split(".")[0] in {"api", "app", "cli"}]


def test_api_does_not_import_delivery():
    assert not {path: names for path, names in imported("api").items() if "delivery" in names}


def test_rendering_imports_only_models():
    # Used by the API and the delivery script alike: it depends on neither, nor on the web framework.
    found = imported("rendering")
    assert {"marshmallow", "models", "rendering"} <= set().union(*found.values())
    assert not {path: names for path, names in found.items()
                if names & PROJECT - {"models", "rendering"} or names & {"flask", "werkzeug", "gunicorn"}}
