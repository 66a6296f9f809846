"""The OpenAPI 3.1 `webhooks` section: one entry per event type, with the body and signature headers."""
from models.webhooks import CHECK_RESULT_KEYS, CHECK_SUMMARY_KEYS, EVENT_TYPES
from rendering.ids import PREFIXES, id_pattern

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
    "properties": {"object": {"type": "string", "default": "webhook_test", "description": "Always `webhook_test`."},
                   "endpoint_id": {"type": "string", "pattern": id_pattern(PREFIXES["webhook_endpoint"])},
                   "message": {"type": "string"}},
}

# type: (component name, summary, data.object component or None for webhook.test, previous_attributes, checks)
_EVENTS = {
    "shipment.status_changed": ("ShipmentStatusChangedEvent",
                                "A shipment moved to a new status (several changes saved together give one event "
                                "from the first status to the last).", "Shipment", ["status"], False),
    "shipment.eta_changed": ("ShipmentEtaChangedEvent",
                             "The shipment's `eta` changed (`effective_eta` and `predicted_eta` send nothing).",
                             "Shipment", ["eta"], False),
    "shipment.checks_completed": ("ShipmentChecksCompletedEvent",
                                  "A run of quality checks finished, after any automatic validation.",
                                  "Shipment", None, True),
    "alert.created": ("AlertCreatedEvent",
                      "A new alert opened on a shipment; `data.object` is the alert as `GET /alerts` lists it.",
                      "MonitoringAlert", None, False),
    "webhook.test": ("WebhookTestEvent",
                     "An admin sent a test event from the settings; sent once, never retried.", None, None, False),
}


def _body(event_type, summary, component, previous, checks):
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
        "type": "object", "description": f"`{event_type}`: {summary}",
        "required": ["id", "type", "created_at", "api_version", "data"],
        "properties": {
            "id": {"type": "string", "pattern": id_pattern(PREFIXES["webhook_event"]),
                   "description": "Event id; identical for every endpoint and on a retry or resend."},
            # Not `const`: response schemas publish no closed value lists (docs/decisions.md); the type is
            # still exact through Event's discriminator, and each body's shape differs anyway.
            "type": {"type": "string", "default": event_type, "description": f"Always `{event_type}`."},
            "created_at": {"type": "string", "format": "date-time"},
            "api_version": {"type": "string", "description": "The version the body was rendered at: the "
                                                             "organization's pin when the event was rendered, "
                                                             "which shapes `data.object`."},
            "data": data,
        },
    }


# Named schemas of /openapi.json (components.schemas): one body per event type, used by the `webhooks`
# entries and by GET /events; `Event` is any of the four listed types, told apart by `type` (the discriminator)
# and by shape (previous_attributes, data.checks, data.object), so exactly one matches.
SCHEMAS = {name: _body(event_type, summary, component, previous, checks)
           for event_type, (name, summary, component, previous, checks) in _EVENTS.items()}
SCHEMAS["Event"] = {
    "description": "An event exactly as it was (or will be) sent to the organization's webhook endpoints.",
    "oneOf": [{"$ref": _REF.format(_EVENTS[event_type][0])} for event_type in EVENT_TYPES],
    "discriminator": {"propertyName": "type",
                      "mapping": {event_type: _REF.format(_EVENTS[event_type][0]) for event_type in EVENT_TYPES}},
}
SCHEMAS["EventList"] = {
    "type": "object", "required": ["object", "data", "has_more"],
    "properties": {"object": {"type": "string", "default": "list", "description": "Always `list`."},
                   "data": {"type": "array", "items": {"$ref": _REF.format("Event")},
                            "description": "The events, newest first."},
                   "has_more": {"type": "boolean", "description": "Whether another page follows."}},
}


def _entry(event_type):
    schema_name, summary, _component, _previous, _checks = _EVENTS[event_type]
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
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": _REF.format(schema_name)}}}},
        "responses": {"2XX": {"description": "Received; any other answer, a timeout or a redirect is a failure."}},
    }}


WEBHOOKS = {event_type: _entry(event_type) for event_type in (*EVENT_TYPES, "webhook.test")}
