"""Responses: one resource or a list envelope, shaped for the request's version."""
from flask import Response, current_app, jsonify

from api.context import version
from api.errors import ResourceMissing
from rendering.ids import parse_id
from rendering.present import list_text, present


def resource(kind, schema_class, obj):
    """A single resource as JSON."""
    return jsonify(present(kind, schema_class, obj, version()))


def listing(kind, schema_class, items, limit=None):
    """The list envelope; with `limit`, `items` holds up to limit + 1 rows and the extra one sets has_more."""
    has_more = limit is not None and len(items) > limit
    if has_more:
        items = items[:limit]
    api_version = version()
    data = [present(kind, schema_class, obj, api_version) for obj in items]
    return jsonify({"object": "list", "data": data, "has_more": has_more})


def stored(body):
    """A stored JSON document (an event body) sent as it is, as jsonify frames a document."""
    return Response(body + "\n", mimetype=current_app.json.mimetype)


def stored_bytes(etag, *parts):
    """Stored JSON read as bytes, `parts` joined once and sent as jsonify frames a document, with its ETag."""
    response = Response(b"".join((*parts, b"\n")), mimetype=current_app.json.mimetype)
    response.set_etag(etag)
    return response


def stored_listing(bodies, limit):
    """The list envelope around stored JSON documents (up to limit + 1; the extra one sets has_more)."""
    return stored_list(bodies[:limit], len(bodies) > limit)


def stored_list(bodies, has_more, **members):
    """The list envelope around stored JSON documents, with `members` after has_more (GET /changes's cursor).

    The documents are served as stored, never parsed and dumped again; the envelope is written as
    listing() writes it (compact, keys in this order).
    """
    return stored(list_text(bodies, has_more, **members))


def path_id(value, prefix, noun):
    """The integer of a path id, or 404 resource_missing for a malformed or wrong-prefix id."""
    object_id = parse_id(value, prefix)
    if object_id is None:
        raise missing(noun, value)
    return object_id


def missing(noun, value):
    """The 404 for an object this organization does not have."""
    return ResourceMissing(f"No such {noun}: {value!r}.", param=None)

