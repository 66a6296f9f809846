"""Concise answers for a model's context: one line per item, with the ids to follow up and the paging cursor.

Each function reads the API's JSON (what the view answered), never the database: the shape has one source.
"""

MAX_PALLET_LINES = 20


def summarize(body, tool):
    """The text answer of a tool for the API body `body`."""
    kind = body.get("object")
    if kind == "list":
        return _listing(body, tool)
    return "\n".join(_lines(body))


def _listing(body, tool):
    items = body.get("data", [])
    lines = [line for item in items for line in _lines(item)]
    if not items:
        lines.append("No items.")
    if "next_since" in body:
        more = " (has_more: call again with it now)" if body.get("has_more") else ""
        lines.append(f"next_since: {body['next_since']}{more}")
    elif body.get("has_more"):
        lines.append(f"More: call {tool} again with starting_after={items[-1]['id']}.")
    return "\n".join(lines)


def _lines(item):
    writer = _WRITERS.get(item.get("object"))
    return writer(item) if writer else [str(item)]


def _join(*parts):
    # Parts are text; `x and f"..."` gives x itself (False, 0, None, []) when x is empty: that part is left out.
    return " · ".join(part for part in parts if isinstance(part, str) and part)


def _counted(*pairs):
    """`6 pallets, 1354 boxes`: each (unit, number) whose number is known."""
    return ", ".join(f"{number} {unit}" for unit, number in pairs if number is not None)


def _day(value):
    return value[:10] if value else None


def _place(place):
    return ", ".join(part for part in (place.get("location"), place.get("country")) if part) or "?"


def shipment_line(shipment):
    """`shp_1 SHIP-... · in_transit · ocean reefer 2°C · Valparaiso, Chile → Rotterdam, Netherlands · ...`."""
    if shipment.get("deleted"):
        return f"{shipment['id']} deleted or hidden (revision {shipment.get('revision')}): drop it"
    cargo_type = shipment.get("cargo_type")
    temperature = shipment.get("temperature_celsius")
    mode = " ".join(str(part) for part in (shipment.get("transport_type"), cargo_type,
                                            None if temperature is None else f"{temperature}°C") if part)
    checks = shipment.get("checks") or {}
    check_text = ", ".join(f"{checks[key]} {key}" for key in ("failed", "warnings") if checks.get(key))
    containers = [container.get("number") or container["id"] for container in shipment.get("containers", [])]
    carrier = (shipment.get("carrier") or {}).get("name")
    return _join(
        shipment["id"], shipment.get("reference"), shipment.get("status") + (" (archived)" if shipment.get("archived") else ""),
        mode, f"{_place(shipment.get('origin') or {})} → {_place(shipment.get('destination') or {})}",
        shipment.get("effective_eta") and f"ETA {shipment['effective_eta']}", carrier and f"carrier {carrier}",
        shipment.get("transport_reference") and f"ref {shipment['transport_reference']}",
        containers and f"containers {', '.join(containers)}",
        shipment.get("produce") and f"produce {', '.join(shipment['produce'])}",
        (shipment.get("parties") or {}).get("consignor") and f"consignor {shipment['parties']['consignor']}",
        shipment.get("labels") and f"labels {', '.join(label['name'] for label in shipment['labels'])}",
        check_text and f"checks {check_text}",
        "revision" in shipment and f"revision {shipment['revision']}")


def _shipment(shipment):
    lines = [shipment_line(shipment)]
    if not shipment.get("deleted"):
        tracking = shipment.get("tracking") or {}
        cargo = shipment.get("cargo") or {}
        lines.append(_join(f"  tracking {tracking.get('state')}", tracking.get("status"),
                           tracking.get("unavailable_reason"), tracking.get("halted_reason")))
        if cargo.get("pallets"):
            counted = _counted(("pallets", cargo["pallets"]), ("boxes", cargo.get("boxes")),
                               ("kg net", cargo.get("net_weight_kg")))  # a weight not known is left out, never "None"
            lines.append(f"  cargo {counted}" + (" (organic)" if shipment.get("organic") else ""))
    return lines


def _timeline(timeline):
    lines = [f"Timeline of {timeline['shipment_id']}: {_count(len(timeline['legs']), 'leg')}, "
             f"{_count(len(timeline['events']), 'event')}, {_count(len(timeline['eta_revisions']), 'ETA revision')}"]
    for leg in timeline["legs"]:
        lines.append(_join(f"leg {leg['position']}", leg.get("transport_type"), leg.get("carrier"),
                           f"{_place(leg['origin'])} → {_place(leg['destination'])}",
                           leg.get("etd") and f"ETD {leg['etd']}", leg.get("eta") and f"ETA {leg['eta']}"))
    for event in timeline["events"]:
        location = event.get("location") or {}
        lines.append(_join(event["id"], event["milestone"], "actual" if event["actual"] else "estimated",
                           event.get("occurred_at_local") or "no time", location.get("name"),
                           event.get("container_number"), (event.get("vessel") or {}).get("name"),
                           event.get("flight_number")))
    for revision in timeline["eta_revisions"]:
        slip = revision.get("slip_seconds")
        lines.append(_join(revision["id"], f"observed {revision['observed_at']}", f"ETA {revision['new_eta']}",
                           "first estimate" if revision.get("first_estimate") else
                           slip is not None and f"slip {slip / 3600:+.1f} h"))
    return lines


def _count(count, noun):
    """`1 leg`, `7 events`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _days(count, what):
    """`1 day left`, `5 days overdue`."""
    return f"{_count(count, 'day')} {what}"


def _time_left(clock):
    """`3 days left` or `2 days overdue` of a clock, or None while it has no last free day."""
    left = clock.get("days_left")
    if clock.get("overdue_days"):
        return _days(clock["overdue_days"], "overdue")
    return None if left is None else _days(max(left, 0), "left")


def _clock(clock):
    return _join(f"  {clock['kind']}", clock.get("container_number"), clock.get("state"), _time_left(clock),
                 clock.get("last_free_day") and f"last free day {clock['last_free_day']}",
                 clock.get("free_days") is not None and f"{clock['free_days']} free days ({clock.get('free_days_source')})")


def _active(clock):
    """`active: demurrage MSKU1234565 running, 1 day left`."""
    words = " ".join(part for part in (clock["kind"], clock.get("container_number"), clock.get("state")) if part)
    left = _time_left(clock)
    return f"active: {words}" + (f", {left}" if left else "")


def _free_time(summary):
    active = summary.get("active_clock")
    head = _join(summary["shipment_id"], summary.get("shipment_reference"),
                 "AT RISK" if summary.get("at_risk") else "not at risk",
                 summary.get("terms_unknown") and "terms unknown",
                 active and _active(active))
    return [head] + [_clock(clock) for clock in summary.get("demurrage", []) + summary.get("detention", [])]


def _document(document):
    return [_join(document["id"], document.get("type"), document.get("filename"), document.get("parse_status"),
                  "data available" if document.get("data_available") else "no data",
                  "downloadable" if document.get("downloadable") else None, _day(document.get("created_at")))]


def _document_data(data):
    fields = data.get("fields") or {}
    lines = [_join(f"Data of {data['document_id']}", data.get("type"), data.get("schema") or "nothing extracted")]
    for key, value in fields.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{key}: {len(value)}")
            lines += ["  " + _join(*(f"{k}={v}" for k, v in row.items() if v not in (None, ""))) for row in value]
        else:
            lines.append(f"{key}: {value}")
    return lines


def _packing_list(packing_list):
    totals = packing_list.get("totals") or {}
    declared = _counted(("boxes", packing_list.get("declared_box_count")),
                        ("kg", packing_list.get("declared_net_weight_kg")))
    lines = [_join(packing_list["id"], packing_list.get("reference"),
                   packing_list.get("document_id") and f"document {packing_list['document_id']}",
                   packing_list.get("container_id") and f"container {packing_list['container_id']}",
                   _counted(("pallets", totals.get("pallets")), ("boxes", totals.get("boxes")),
                            ("kg net", totals.get("net_weight_kg"))),
                   declared and f"declared {declared}")]
    pallets = packing_list.get("pallets", [])
    for pallet in pallets[:MAX_PALLET_LINES]:
        produce = sorted({_join(line.get("produce_name"), line.get("variety")) for line in pallet.get("lines", [])})
        boxes = sum(line.get("box_count") or 0 for line in pallet.get("lines", []))
        lines.append(f"  {pallet['id']} {pallet.get('pallet_number')}: {'; '.join(produce)}, {boxes} boxes, "
                     f"{_count(len(pallet.get('lines', [])), 'line')}")
    if len(pallets) > MAX_PALLET_LINES:
        lines.append(f"  ... {len(pallets) - MAX_PALLET_LINES} more pallets (full=true lists every line)")
    return lines


def _alert(alert):
    return [_join(alert["id"], alert.get("shipment_id"), alert.get("shipment_reference"), alert.get("severity"),
                  alert.get("key"), f"{alert.get('title')}: {alert.get('summary')}", f"since {alert.get('since')}")]


def _check(check):
    return [_join(check["id"], check.get("shipment_id"), check.get("shipment_reference"), check.get("status"),
                  check.get("key"), f"{check.get('title')}: {check.get('message')}", _day(check.get("ran_at")))]


def _organization(organization):
    token = organization.get("token") or {}
    return [_join(organization["id"], organization.get("name"), organization.get("slug"),
                  f"version {organization.get('api_version')}",
                  f"token {token.get('id')} {token.get('name')!r} of {token.get('user_email')}",
                  f"expires {token.get('expires_at') or 'never'}")]


_WRITERS = {"shipment": _shipment, "timeline": _timeline, "free_time_summary": _free_time, "document": _document,
            "document_data": _document_data, "packing_list": _packing_list, "monitoring_alert": _alert,
            "shipment_check": _check, "organization": _organization}
