"""Quality checks (with their runs) and monitoring alerts that follow from what happened to a plan."""
from datetime import timedelta

from demo import catalog
from demo.plans import DAY, HOUR
from demo.tracking import MINUTE
from models.free_time_rules import last_free_day

CHECK_TITLES = {key: (category, title) for key, category, title in catalog.CHECKS}


def demurrage_days_left(plan):
    """Days left of the running demurrage clocks (discharge day counts as the first free day)."""
    now, (free_days, _detention, basis) = plan.org.now, plan.free_days
    if plan.mode != "ocean" or free_days is None or plan.terms_source == "unknown":
        return []
    left = []
    for discharge, gate_out in zip(plan.discharge, plan.gate_out):
        if discharge is not None and discharge <= now and (gate_out is None or gate_out > now):
            left.append((last_free_day(discharge.date(), free_days, basis) - now.date()).days)
    return left


def add_checks(batch, plan):
    """One check per key, from the shipment's latest run; drafts may have a run still going."""
    rng, now, org = plan.rng, plan.org.now, plan.org
    if plan.status == "draft" and rng.random() < 0.5:
        return
    started = min(now - 5 * MINUTE, plan.created + rng.uniform(0.5, 3) * HOUR)
    if plan.lifecycle() in ("arrived", "done"):
        started = min(now - 5 * MINUTE, plan.arrival + rng.uniform(1, 12) * HOUR)
    unfinished = plan.status == "draft" or "run_unfinished" in plan.flags
    finished = None if unfinished else started + rng.uniform(2, 40) * timedelta(seconds=1)
    run = batch.add("check_runs", organization_id=org.id, shipment_id=plan.shipment_id, started_at=started,
                    finished_at=finished)
    keys = [key for key, _c, _t in catalog.CHECKS]
    if plan.lean:
        keys = keys[:3]
    for key in keys:
        status, message = ("pending", "Waiting for the check run to finish.") if unfinished else _result(plan, key)
        category, title = CHECK_TITLES[key]
        batch.add("checks", organization_id=org.id, shipment_id=plan.shipment_id, check_run_id=run, key=key,
                  category=category, status=status, title=title, message=message, ran_at=finished or started)


def _result(plan, key):
    docs = plan.document_types
    transport = {"ocean": "bill_of_lading", "air": "air_waybill", "road": "cmr"}[plan.mode]
    if key == "has_commercial_invoice":
        if plan.lean:
            return "skipped", "Not checked for this shipment."
        return ("passed", "Invoice received.") if "commercial_invoice" in docs else (
            "failed", "No commercial invoice has been received.")
    if key == "has_packing_list":
        return ("passed", "Packing list read.") if plan.packing_read else ("failed", "No packing list has been read.")
    if key == "has_transport_document":
        return ("passed", "Transport document received.") if transport in docs else (
            "failed", "No bill of lading or air waybill has been received.")
    if key == "has_phytosanitary_certificate":
        if plan.mode == "road":
            return "skipped", "Not required within the EU."
        return ("passed", "Certificate received.") if "phytosanitary_certificate" in docs else (
            "warning", "The phytosanitary certificate is usually received before departure.")
    if key == "packing_list_totals_match":
        if "totals_mismatch" in plan.flags:
            return "warning", "The packing list declares 12 boxes more than its lines add up to."
        return "passed", "Declared totals match the lines."
    if key == "container_numbers_match":
        if plan.mode != "ocean":
            return "skipped", "The shipment has no containers."
        if "container_mismatch" in plan.flags:
            return "failed", "The bill of lading names a container the packing list does not."
        return "passed", "Container numbers match."
    if key == "temperature_set_point":
        produce = catalog.PRODUCE[plan.produce[0]]
        if produce.cargo_type == "ambient":
            return "skipped", "Ambient cargo has no set point."
        return "passed", f"Set point {produce.temperature} °C suits {produce.name.lower()}."
    if plan.consignee != plan.org.importer.consignee:
        return "warning", f"The consignee is {plan.consignee}."
    return "passed", "The consignee is the organization."


def add_alerts(batch, plan):
    """Alerts for what went wrong, resolved once the shipment is done with it."""
    rng, now = plan.rng, plan.org.now
    stage = plan.lifecycle()
    done = stage == "done"
    alerts = []
    if plan.revisions >= 2 and plan.eta is not None and stage != "planned":
        alerts.append(("eta_drift", "warning", "ETA moved", f"The carrier moved the arrival to {plan.eta:%d %b %Y}.",
                       plan.etd + 2 * DAY, plan.arrival if done else None))
    if "no_invoice" in plan.flags:
        alerts.append(("missing_documents", "warning", "Commercial invoice missing",
                       "No commercial invoice has been received for this shipment.", plan.created + DAY, None))
    left = demurrage_days_left(plan)
    if left and min(left) <= 2:
        title = "Demurrage overdue" if min(left) < 0 else "Demurrage free time ends soon"
        summary = (f"{-min(left)} days past the last free day." if min(left) < 0
                   else f"{min(left)} free days left at the terminal.")
        since = now - rng.uniform(1, 20) * HOUR
        alerts.append(("demurrage_risk", "critical" if min(left) < 0 else "warning", title, summary, since, None))
    if plan.halted == "errored" and stage != "done":
        alerts.append(("tracking_stale", "info", "Tracking stopped updating",
                       "The carrier feed failed on this reference.", now - 2 * DAY, None))
    if "temperature" in plan.flags or (stage != "planned" and plan.mode == "ocean" and rng.random() < 0.02):
        alerts.append(("temperature_deviation", "critical", "Temperature out of range",
                       "The reefer reported 3.1 °C above the set point for 4 hours.", plan.etd + 5 * DAY,
                       plan.etd + 6 * DAY if rng.random() < 0.5 else None))
    if "rollover" in plan.flags:
        alerts.append(("vessel_rollover", "warning", "Container rolled to the next vessel",
                       "One container missed its booked sailing.", plan.etd, None))
    if plan.parse_failed or rng.random() < 0.01:
        alerts.append(("parser_low_confidence", "info", "Document read with low confidence",
                       "An operator should review the extracted data.", plan.created + HOUR, None))
    for key, severity, title, summary, since, resolved in alerts:
        since = min(since, now - 2 * HOUR)
        resolved = min(max(resolved, since + HOUR), now) if resolved else None
        first = since + rng.uniform(1, 30) * MINUTE
        last = max(first, resolved or now - rng.uniform(0, 1) * HOUR)
        batch.add("alerts", organization_id=plan.org.id, shipment_id=plan.shipment_id, key=key, severity=severity,
                  title=title, summary=summary, since=since, first_detected_at=first, last_detected_at=last,
                  resolved_at=resolved)
