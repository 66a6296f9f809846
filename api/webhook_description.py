"""The OpenAPI 3.1 `webhooks` section: one entry per event type, with the body and signature headers."""
from api.ids import PREFIXES, id_pattern
from models.webhooks import CHECK_RESULT_KEYS, CHECK_SUMMARY_KEYS, EVENT_TYPES

_REF = "#/components/schemas/{}"
WEBHOOKS_TAG = {"name": "Webhooks", "description": "Signed HTTPS POST requests the service sends to the endpoints "
                                                   "an organization admin registers in the application settings."}
# (name, security scheme) of the Standard Webhooks signature that authenticates every webhook request.
SIGNATURE_SCHEME = ("webhookSignature", {
    "type": "apiKey", "in": "header", "name": "webhook-signature",
    "description": "Standard Webhooks signature with the endpoint's own secret. `webhook-signature` is `v1,` + "
                   "the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>` (the two headers and "
                   "the exact bytes received), keyed with the endpoint's signing secret: the text after `whsec_`, "
                   "base64-decoded. Receivers compute it over the raw body, compare in constant time and reject "
                   "an old `webhook-timestamp` (for example more than 5 minutes away from their clock). Rolling "
                   "the secret replaces it at once: there is no overlap with two signatures."})

_HEADERS = [
    ("webhook-id", "The event id (`msg_<int>`); the same for every endpoint, retry and resend.",
     {"type": "string", "pattern": id_pattern(PREFIXES["webhook_event"])}),
    ("webhook-timestamp", "Unix time in seconds of this attempt; reject old timestamps.",
     {"type": "string", "pattern": "^[0-9]+$"}),
    ("webhook-signature", "`v1,` + base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed "
                          "with the endpoint secret without its `whsec_` prefix, base64-decoded (Standard Webhooks).",
     {"type": "string", "pattern": "^v1,[A-Za-z0-9+/]+=*$"}),
    ("User-Agent", "Always `Service-Webhooks/1.0`.", {"type": "string", "const": "Service-Webhooks/1.0"}),
]

_CHECKS = {
    "type": "object", "description": "The finished run of quality checks.",
    "properties": {
        "summary": {"type": "object", "description": "Counts of the run's checks by status.",
                    "additionalProperties": {"type": "integer"},
                    "properties": {key: {"type": "integer"}
                                   for key in CHECK_SUMMARY_KEYS}},
        "results": {"type": "array", "items": {
            "type": "object", "required": list(CHECK_RESULT_KEYS),
            "properties": {"check_type": {"type": "string", "description": "The check's category."},
                           "key": {"type": "string"},
                           "status": {"type": "string",
                                      "description": "pending, passed, failed, skipped or warning."}}}},
    },
    "required": ["summary", "results"],
}

_TEST_OBJECT = {
    "type": "object", "required": ["object", "endpoint_id", "message"],
    "properties": {"object": {"type": "string", "const": "webhook_test"},
                   "endpoint_id": {"type": "string", "pattern": id_pattern(PREFIXES["webhook_endpoint"])},
                   "message": {"type": "string"}},
}

_EVENTS = {
    "shipment.status_changed": ("A shipment moved to a new status (several changes saved together give one event "
                                "from the first status to the last).", "Shipment", ["status"], False),
    "shipment.eta_changed": ("The shipment's `eta` changed (`effective_eta` and `predicted_eta` send nothing).",
                             "Shipment", ["eta"], False),
    "shipment.checks_completed": ("A run of quality checks finished, after any automatic validation.",
                                  "Shipment", None, True),
    "alert.created": ("A new alert opened on a shipment; `data.object` is the alert as `GET /alerts` lists it.",
                      "MonitoringAlert", None, False),
    "webhook.test": ("An admin sent a test event from the settings; sent once, never retried.", None, None, False),
}


def _body(event_type, component, previous, checks):
    if previous:
        previous_schema = {"type": "object", "required": previous,
                           "properties": {name: {"type": ["string", "null"]} for name in previous},
                           "description": "The values before the change."}
    else:
        previous_schema = {"type": "null", "description": "Always null for this type."}
    data = {"type": "object", "required": ["object", "previous_attributes"],
            "properties": {"object": {"$ref": _REF.format(component)} if component else _TEST_OBJECT,
                           "previous_attributes": previous_schema}}
    if checks:
        data["properties"]["checks"] = _CHECKS
        data["required"].append("checks")
    return {
        "type": "object", "required": ["id", "type", "created_at", "api_version", "data"],
        "properties": {
            "id": {"type": "string", "pattern": id_pattern(PREFIXES["webhook_event"]),
                   "description": "Event id; identical for every endpoint and on a retry or resend."},
            "type": {"type": "string", "const": event_type},
            "created_at": {"type": "string", "format": "date-time"},
            "api_version": {"type": "string", "description": "The organization's pinned version, which shapes "
                                                             "`data.object`."},
            "data": data,
        },
    }


def _entry(event_type):
    summary, component, previous, checks = _EVENTS[event_type]
    return {"post": {
        "tags": [WEBHOOKS_TAG["name"]],
        "operationId": "webhook_" + event_type.replace(".", "_"),
        "summary": summary,
        "description": "HTTPS POST to each enabled endpoint subscribed to the type, signed as `webhookSignature` "
                       "says. A 2xx within 10 s is success; anything else (redirects included) is retried 8 times "
                       "in all over about a day.",
        "security": [{SIGNATURE_SCHEME[0]: []}],
        "parameters": [{"in": "header", "name": name, "required": True, "description": text, "schema": schema}
                       for name, text, schema in _HEADERS],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": _body(event_type, component, previous, checks)}}},
        "responses": {"2XX": {"description": "Received; any other answer, a timeout or a redirect is a failure."}},
    }}


WEBHOOKS = {event_type: _entry(event_type) for event_type in (*EVENT_TYPES, "webhook.test")}
