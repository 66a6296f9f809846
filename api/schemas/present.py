"""An object as the API shows it: dumped by its schema, then shaped for a version (no Flask app here).

The API's responses (api/responses.py) and the webhook bodies (delivery/outbox.py) both come through
`present`, so an event's data.object is exactly what the API would answer at the same version.
"""
import hashlib
import json
from pathlib import Path

from flask.json.provider import DefaultJSONProvider

from api import versions
from api.schemas.compiled import dumper

_API = Path(__file__).resolve().parent.parent
# What decides the bytes of a stored rendering (a shipment, its packing lists) besides its data and
# version: the schemas, the dumper, the version steps, the ids and the assembly of rows. Stored
# renderings carry this digest, so a deploy that changes any of them never serves one that other code made.
_SHAPING_FILES = sorted([*(_API / "schemas").glob("*.py"), _API / "versions.py", _API / "ids.py",
                         _API.parent / "models" / "shipments.py", _API.parent / "models" / "packing_lists.py"])
RENDERER = hashlib.blake2b(b"".join(path.read_bytes() for path in _SHAPING_FILES), digest_size=8).hexdigest()


def present(kind, schema_class, obj, version):
    """`obj` dumped by `schema_class` and shaped as `version` shows a `kind` (versions.DOWNGRADES)."""
    return versions.shape(kind, dumper(schema_class)(obj), version)


def dumps(document):
    """JSON text exactly as the API's responses write it (compact, keys in schema order, ASCII)."""
    return json.dumps(document, default=DefaultJSONProvider.default, ensure_ascii=True, separators=(",", ":"))


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
