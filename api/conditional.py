"""Conditional requests: an ETag on every 200, and 304 Not Modified when If-None-Match names it."""
import hashlib

from flask import g, request

from api import guard
from api.errors import error_response

# What a 304 keeps of the 200's headers (RFC 9110 15.4.5), and X-Poll-Interval (when to call again, not about
# the body: api/waiting.py); Service-Version and the RateLimit headers are added after this hook runs, so they
# are on the 304 too.
NOT_MODIFIED_HEADERS = frozenset({"etag", "cache-control", "content-location", "date", "expires", "vary",
                                  "x-poll-interval"})


def body_etag(version, body):
    """A strong ETag of the exact bytes sent and the version that shaped them: 128 bits of BLAKE2b."""
    digest = hashlib.blake2b(digest_size=16)
    # The version is hashed too: two versions may give the same bytes, but not the same Service-Version.
    digest.update((version or "").encode() + b"\n")
    digest.update(body)
    return digest.hexdigest()


def stored_etag(version, digest, has_more=False):
    """A strong ETag of a body made of stored renderings, from what the database keeps of them, not the body.

    `digest` is the MD5 of the renderings' own MD5s (shipment_renderings.body_md5, kept when each is
    written) joined with commas in the body's order: the same body gives the same ETag, any change to it
    (a rendering, their order or number, has_more, the version) another, and no request hashes its body.
    """
    digest = digest if isinstance(digest, bytes) else digest.encode()
    return hashlib.blake2b(b"%s\n%s\n%d" % ((version or "").encode(), digest, has_more), digest_size=16).hexdigest()


def row_etag(*values):
    """A strong ETag of a row's validator columns, for a body that is not read to build it (a stored file)."""
    return hashlib.blake2b("\x1f".join(str(value) for value in values).encode(), digest_size=16).hexdigest()


def answer_conditionally(response):
    """Add the ETag to a 200, turn it into a 304 when If-None-Match matches; a 304 counts in its own budget."""
    if request.method not in ("GET", "HEAD"):
        # RFC 9110 13.2.1: If-None-Match turns only a GET or HEAD into a 304; POST /mcp answers with the tool's.
        return response
    if response.status_code == 200 and "ETag" not in response.headers and not response.direct_passthrough:
        response.set_etag(body_etag(g.get("version"), response.get_data()))
    if response.status_code == 200 and "ETag" in response.headers and if_none_match_matches(response):
        not_modified(response)
        if request.if_none_match.star_tag:
            # `*` matches any ETag, so it proves nothing kept from an earlier answer: counted like any request.
            return response
    if response.status_code == 304:
        refused = guard.count_not_modified()
        if refused is not None:
            return error_response(refused)
    return response


def if_none_match_matches(response):
    """Weak comparison (RFC 9110 13.1.2) of If-None-Match with the response's ETag; `*` matches any."""
    etag, _weak = response.get_etag()
    return etag is not None and request.if_none_match.contains_weak(etag)


def not_modified(response):
    """Make `response` a 304 in place: no body, only the headers RFC 9110 lets a 304 repeat."""
    # A streamed file is closed now: the body that held it is dropped.
    response.close()
    response.response = []
    response.status_code = 304
    for name in {name.lower() for name, _value in response.headers} - NOT_MODIFIED_HEADERS:
        del response.headers[name]
