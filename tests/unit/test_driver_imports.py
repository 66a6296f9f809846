"""The database driver is models/'s alone: every other module reaches its errors through models.db, already
translated (models/cursors.py), and never classifies one itself."""
import ast

from tests.support import ROOT

# The benches and the tests drive the database themselves (seeding, faults, the floor).
NOT_CHECKED = ("models", "tests", "bench", ".venv", ".git")
# What tells the driver's errors apart (models/db_errors.py): called where the driver is, in models/ only.
CLASSIFYING = ("classify", "is_disconnect", "translate", "unavailable", "OperationalError", "InterfaceError",
               "LOST", "TIMEOUT", "SETUP", "STATEMENT")


def imported_modules(path):
    """Every module a Python file imports, by its dotted name."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module)
    return names


def names_read_from_db(path):
    """Every `db.<name>` a Python file reads."""
    return [node.attr for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "db"]


def checked_files():
    """The project's Python files outside NOT_CHECKED."""
    return [path for path in sorted(ROOT.rglob("*.py"))
            if path.relative_to(ROOT).parts[0] not in NOT_CHECKED]


def test_no_module_outside_models_imports_the_driver():
    files = checked_files()
    assert {"app.py", "api", "cli", "delivery", "mcp_server", "demo"} <= {path.relative_to(ROOT).parts[0]
                                                                          for path in files}
    importing = {str(path.relative_to(ROOT)): name for path in files for name in imported_modules(path)
                 if name.split(".")[0] == "psycopg2" or name == "models.db_errors"}
    assert importing == {}


def test_no_module_outside_models_classifies_a_database_error():
    classifying = {str(path.relative_to(ROOT)): name for path in checked_files() for name in names_read_from_db(path)
                   if name in CLASSIFYING}
    assert classifying == {}


def test_the_walk_finds_an_import_of_the_driver(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import json\nfrom psycopg2 import errors\nimport psycopg2.extensions as ext\n")
    assert imported_modules(module) == ["json", "psycopg2", "psycopg2.extensions"]


def test_the_walk_finds_a_classification(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("from models import db\nif db.classify(error) == db.SETUP:\n    raise db.DatabaseSetupError()\n")
    assert sorted(names_read_from_db(module)) == ["DatabaseSetupError", "SETUP", "classify"]
