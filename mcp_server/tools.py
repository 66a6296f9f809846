"""The tools: each is one GET view of the API; its description and input schema come from that view's operation
in the OpenAPI description (api/openapi.build_spec), so the tool, /openapi.json and /docs say the same thing."""
import copy
import re
from dataclasses import dataclass

import mcp_types as types

from api.apidoc import openapi_path
from api.openapi import build_spec

# (tool name, the view's endpoint): what people ask about shipments, in the order an agent usually asks it.
TOOLS = (
    ("search_shipments", "shipments.list_shipments"),
    ("get_shipment", "shipments.get_shipment"),
    ("get_shipment_timeline", "timeline.get_shipment_timeline"),
    ("get_shipment_free_time", "free_time.get_shipment_free_time"),
    ("list_free_time_at_risk", "free_time.list_free_time_at_risk"),
    ("list_shipment_documents", "documents.list_shipment_documents"),
    ("get_document_data", "documents.get_document_data"),
    ("list_shipment_packing_lists", "packing_lists.list_shipment_packing_lists"),
    ("list_alerts", "alerts.list_alerts"),
    ("list_checks", "checks.list_checks"),
    ("list_changes", "changes.list_changes"),
    ("get_organization", "organization.get_organization"),
)

FULL = {"type": "boolean", "default": False,
        "description": "true: the API's JSON exactly as the HTTP endpoint returns it, instead of the summary lines."}
ANSWER = ("Answer: one summary line per item with its id (pass ids back unchanged to the other tools) and, "
          "for paged lists, the cursor to continue with; `full: true` returns the API's JSON instead.")
EXTENSION = "shiptrack_mcp_tools"
_VARIABLE = re.compile(r"{([A-Za-z_]+)}")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, the API path it GETs (with `{variables}`), and what the SDK lists."""

    name: str
    path: str
    path_parameters: tuple
    query_parameters: tuple
    tool: types.Tool

    def request(self, arguments):
        """(path, query) of the GET for `arguments`; raises ValueError naming a missing path argument."""
        values = {}
        for name in self.path_parameters:
            value = arguments.get(name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} is required: a `{name.removesuffix('_id')[:3]}_<int>` id as the API gives it.")
            values[name] = value
        # The id goes in the path as given: the API answers a malformed or foreign id with its own 404.
        path = _VARIABLE.sub(lambda match: _path_segment(values[match.group(1)]), self.path)
        query = {name: arguments[name] for name in self.query_parameters if arguments.get(name) is not None}
        return path, query


def _path_segment(value):
    # Nothing but the id's own characters reaches the path: `../organization` cannot pick another route.
    return re.sub(r"[^A-Za-z0-9_]", "-", value)


def tool_specs(app):
    """{name: ToolSpec} of `app`, built from its OpenAPI description once per app."""
    if EXTENSION not in app.extensions:
        document = build_spec(app)
        rules = {rule.endpoint: rule for rule in app.url_map.iter_rules()}
        specs = {}
        for name, endpoint in TOOLS:
            path = openapi_path(rules[endpoint].rule)
            specs[name] = _spec(name, path, document["paths"][path]["get"])
        app.extensions[EXTENSION] = specs
    return app.extensions[EXTENSION]


def _spec(name, path, operation):
    properties, required, path_parameters, query_parameters = {}, [], [], []
    for parameter in operation["parameters"]:
        if "$ref" in parameter:       # Service-Version, If-None-Match, X-Request-Id: headers, not arguments
            continue
        schema = copy.deepcopy(parameter["schema"])
        schema["description"] = parameter["description"]
        properties[parameter["name"]] = schema
        if parameter["in"] == "path":
            required.append(parameter["name"])
            path_parameters.append(parameter["name"])
        else:
            query_parameters.append(parameter["name"])
    properties["full"] = FULL
    description = "\n\n".join(part for part in (operation["summary"], operation["description"]
                                                if operation["description"] != operation["summary"] else "",
                                                f"(GET {path}) {ANSWER}") if part)
    tool = types.Tool(name=name, title=operation["summary"], description=description,
                      input_schema={"type": "object", "properties": properties, "required": required,
                                    "additionalProperties": False},
                      annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                                        idempotent_hint=True, open_world_hint=False))
    return ToolSpec(name, path, tuple(path_parameters), tuple(query_parameters), tool)
