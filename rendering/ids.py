"""Public ids: `<prefix>_<positive integer>`, no leading zero, at most 18 digits."""
import re

PREFIXES = {
    "organization": "org", "token": "tok", "shipment": "shp", "container": "ctr",
    "label": "lbl", "shipment_leg": "leg", "tracking_event": "evt", "eta_revision": "eta",
    "monitoring_alert": "alr", "shipment_check": "chk", "document": "doc",
    "packing_list": "pkl", "pallet": "plt", "packing_line": "pln",
    # Webhooks: `evt_` already names tracking events, so webhook events are msg_<n>.
    "webhook_event": "msg", "webhook_endpoint": "whe",
}

# The only spelling of an id's number: 1 to 18 digits (a bigint), no leading zero.
_NUMBER = "[1-9][0-9]{0,17}"
_ID = re.compile(f"([a-z]{{3}})_({_NUMBER})", re.ASCII)


# A position in GET /changes: `<transaction>.<shipment number>`, both without leading zeros
# (xid8 and bigint); "0.0" is the start.
CHANGE_CURSOR_PATTERN = r"^(0|[1-9][0-9]{0,19})\.(0|[1-9][0-9]{0,18})$"


def format_id(prefix, object_id):
    """`shp`, 42 -> 'shp_42'; None stays None."""
    return None if object_id is None else f"{prefix}_{object_id}"


def parse_id(value, prefix):
    """The integer of a well-formed id with this prefix, else None."""
    match = _ID.fullmatch(value or "")
    if match is None or match.group(1) != prefix:
        return None
    return int(match.group(2))


def id_pattern(prefix):
    """The id pattern as a regular expression string, for the OpenAPI description."""
    return f"^{prefix}_{_NUMBER}$"
