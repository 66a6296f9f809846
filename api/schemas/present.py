"""An object as the API shows it: dumped by its schema, then shaped for a version (no Flask here).

The API's responses (api/render.py) and the webhook bodies (delivery/render.py) both come through
`present`, so an event's data.object is exactly what the API would answer at the same version.
"""
from api import versions
from api.schemas.compiled import dumper


def present(kind, schema_class, obj, version):
    """`obj` dumped by `schema_class` and shaped as `version` shows a `kind` (versions.DOWNGRADES)."""
    return versions.shape(kind, dumper(schema_class)(obj), version)
