"""What `python3 dev.py demo` installs: the service and the demo's two packages (requirements-demo.txt), not
the test toolchain, and every module the demo runs imports comes from them."""
import ast
import importlib.metadata
import re
import sys

from packaging.requirements import Requirement

import dev
from tests.support import ROOT

# What the demo runs: dev.py, the service (gunicorn, the delivery process, the CLI) and the demo's own code.
RUN_BY_THE_DEMO = ["dev.py", "dev_processes.py", "app.py", "config.py", "logs.py", "serving.py", "gunicorn.conf.py",
                   "api", "rendering", "models", "delivery", "cli", "demo", "mcp_server"]
LOCAL = {path.stem for path in ROOT.iterdir() if path.suffix == ".py" or path.is_dir()}  # the project's own


def canonical(name):
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path):
    """The distributions a requirements file names, following its `-r` includes."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            names |= pinned(path.parent / line[3:].strip())
        elif line:
            names.add(canonical(re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0]))
    return names


def installed_with(names):
    """`names` and every distribution they require, as installed (for this Python, no extras)."""
    found, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        for text in importlib.metadata.requires(name) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return found


def test_the_demo_installs_the_service_and_two_packages_more():
    runtime, demo = pinned(ROOT / "requirements.txt"), pinned(ROOT / "requirements-demo.txt")
    development = pinned(ROOT / "requirements-dev.txt")
    assert dev.NEEDS == {"test": "dev", "demo": "demo", "smoke": "runtime"}
    assert demo - runtime == {"standardwebhooks", "trustme"}
    assert demo < development
    assert not {"pytest", "pytest-xdist", "schemathesis", "selenium", "openapi-python-client"} & installed_with(demo)


def test_every_module_the_demo_runs_imports_comes_with_its_requirements():
    provided = installed_with(pinned(ROOT / "requirements-demo.txt"))
    distributions = importlib.metadata.packages_distributions()
    files = [path for name in RUN_BY_THE_DEMO
             for path in ([ROOT / name] if name.endswith(".py") else sorted((ROOT / name).rglob("*.py")))]
    missing = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in LOCAL:
                    continue
                if not {canonical(name) for name in distributions.get(top, [top])} & provided:
                    missing.add((path.relative_to(ROOT).as_posix(), module))
    assert missing == set()
