"""API versions: which are published, and the one function that shapes a response for a version."""
import re

PUBLISHED = ("2026-10-01",)
LATEST = PUBLISHED[-1]
VERSION_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)

# Steps that turn the latest shape of an object into an older version's shape.
# A future version that renames a field adds one (version, kind, function) entry:
# objects requested at a version older than `version` pass through `function`.
DOWNGRADES = ()


def shape(kind, obj, version):
    """Return `obj` (a dumped resource of `kind`, latest shape) as `version` shows it."""
    for step_version, step_kind, step in reversed(DOWNGRADES):
        if step_kind == kind and version < step_version:
            obj = step(obj)
    return obj
