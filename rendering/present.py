"""An object as the API shows it: dumped by its schema, then shaped for a version, and its JSON text.

The API's responses (api/responses.py) and the webhook bodies (delivery/outbox.py) both come through
`present`, so an event's data.object is exactly what the API would answer at the same version.
"""
import decimal
import hashlib
import json
import uuid
from pathlib import Path

from rendering import versions
from rendering.compiled import dumper

_PACKAGE = Path(__file__).resolve().parent
# What decides the bytes of a stored rendering (a shipment, its packing lists) besides its data and
# version: this package (the schemas, the dumper, the version steps, the ids, the assembly of renderings)
# and the rows the models read. Stored renderings carry this digest, so a deploy that changes any of them
# never serves one that other code made.
_SHAPING_FILES = sorted([*_PACKAGE.rglob("*.py"), _PACKAGE.parent / "models" / "shipments.py",
                         _PACKAGE.parent / "models" / "packing_lists.py"])
RENDERER = hashlib.blake2b(b"".join(path.read_bytes() for path in _SHAPING_FILES), digest_size=8).hexdigest()


def present(kind, schema_class, obj, version):
    """`obj` dumped by `schema_class` and shaped as `version` shows a `kind` (versions.DOWNGRADES)."""
    return versions.shape(kind, dumper(schema_class)(obj), version)


def dumps(document):
    """JSON text exactly as the API's responses write it (compact, keys in schema order, ASCII)."""
    return json.dumps(document, default=_json_default, ensure_ascii=True, separators=(",", ":"))


def _json_default(value):
    # As Flask's JSON provider writes the two types a dumped object can still hold (a Raw field's value) and
    # JSON has not; a date never reaches here: every schema field dumps dates as text.
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def list_text(bodies, has_more, **members):
    """The list envelope around JSON texts, with `members` after has_more, written as dumps writes a list.

    The texts are joined as they are, never parsed and dumped again (stored renderings, event bodies).
    """
    tail = "".join(f",{dumps(name)}:{dumps(value)}" for name, value in members.items())
    return ('{"object":"list","data":[' + ",".join(bodies) + '],"has_more":' + ("true" if has_more else "false")
            + tail + "}")


def list_bytes(joined, has_more):
    """list_text's envelope as bytes, around JSON texts already joined with commas (as stored_list reads them)."""
    return (b'{"object":"list","data":[', joined, b'],"has_more":true}' if has_more else b'],"has_more":false}')
