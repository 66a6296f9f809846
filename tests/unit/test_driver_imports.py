"""The database driver is models/'s alone: every other module reaches its errors through models.db."""
import ast

from tests.support import ROOT

# The benches and the tests drive the database themselves (seeding, faults, the floor).
NOT_CHECKED = ("models", "tests", "bench", ".venv", ".git")


def imported_modules(path):
    """Every module a Python file imports, by its dotted name."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module)
    return names


def checked_files():
    """The project's Python files outside NOT_CHECKED."""
    return [path for path in sorted(ROOT.rglob("*.py"))
            if path.relative_to(ROOT).parts[0] not in NOT_CHECKED]


def test_no_module_outside_models_imports_the_driver():
    files = checked_files()
    assert {"app.py", "api", "cli", "mcp_server", "demo"} <= {path.relative_to(ROOT).parts[0] for path in files}
    importing = {str(path.relative_to(ROOT)): name for path in files for name in imported_modules(path)
                 if name.split(".")[0] == "psycopg2" or name == "models.db_errors"}
    assert importing == {}


def test_the_walk_finds_an_import_of_the_driver(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import json\nfrom psycopg2 import errors\nimport psycopg2.extensions as ext\n")
    assert imported_modules(module) == ["json", "psycopg2", "psycopg2.extensions"]
