"""Turning attempt outcomes into rows: the delivery's next step, the attempt log, endpoint health."""
import logging
from dataclasses import dataclass
from datetime import datetime

from delivery import retry
from delivery.sender import Outcome
from models import webhook_deliveries, webhooks

log = logging.getLogger("delivery")


@dataclass
class Result:
    """One finished attempt of a claimed delivery row (from claim_due or create_claimed)."""

    row: dict
    attempted_at: datetime
    finished_at: datetime
    outcome: Outcome


def _health(endpoints, results):
    """Replay failures in time order over each endpoint's failure run; returns endpoints to disable."""
    disable = {}
    for result in sorted(results, key=lambda r: r.finished_at):
        if result.row["reason"] == "test":
            continue  # a test event never counts toward disabling
        endpoint = endpoints.get(result.row["endpoint_id"])
        if endpoint is None:
            continue
        endpoint["changed"] = True
        endpoint.setdefault("was", (endpoint["failing_since"], endpoint["last_failure_at"]))
        if result.outcome.succeeded:
            endpoint["failing_since"] = None
            continue
        at = result.finished_at
        endpoint["failing_since"] = retry.failure_run(endpoint["failing_since"], endpoint["last_failure_at"], at)
        endpoint["last_failure_at"] = at
        if endpoint["enabled"] and retry.should_disable(endpoint["failing_since"], at):
            endpoint["enabled"] = False
            disable[endpoint["id"]] = (at, f"deliveries failed for more than 3 days "
                                           f"(since {endpoint['failing_since']:%Y-%m-%d %H:%M} UTC)")
    return disable


def _next_step(result, endpoint_enabled):
    """(state, next_attempt_at) of a delivery after this attempt."""
    row, outcome = result.row, result.outcome
    if outcome.succeeded:
        return "succeeded", None
    if row["reason"] != "test" and not endpoint_enabled:
        return "dropped", None
    due = retry.next_attempt_at(row["attempt"], result.finished_at, row["max_attempts"])
    return ("pending", due) if due is not None else ("failed", None)


def record(conn, results):
    """Record a batch of results in the caller's transaction; returns the endpoint ids disabled now."""
    if not results:
        return []
    if any(not r.outcome.succeeded and r.row["reason"] != "test" for r in results):
        endpoints = webhook_deliveries.lock_endpoints(conn, {r.row["endpoint_id"] for r in results})
        disable = _health(endpoints, results)
    else:
        # Only successes: no lock needed, a success just ends any failure run.
        webhook_deliveries.end_failure_runs(conn, {r.row["endpoint_id"] for r in results if r.row["reason"] != "test"})
        endpoints = {r.row["endpoint_id"]: {"enabled": True} for r in results}
        disable = {}
    finish, steps = [], {}
    for result in results:
        row, outcome = result.row, result.outcome
        endpoint = endpoints.get(row["endpoint_id"])
        state, due = _next_step(result, endpoint is not None and endpoint["enabled"])
        steps[row["id"]] = (state, due)
        finish.append((row["id"], str(row["lease_token"]), row["attempt"], state, due, outcome.status_code,
                       outcome.error, None if state == "pending" else result.finished_at))
    ours = webhook_deliveries.finish_deliveries(conn, finish)
    webhook_deliveries.insert_attempts(conn, [
        (r.row["id"], r.row["endpoint_id"], r.row["event_id"], r.row["attempt"], r.row["reason"], r.attempted_at,
         r.outcome.duration_ms, r.outcome.succeeded, r.outcome.status_code, r.outcome.error,
         r.outcome.response_body, r.outcome.address)
        for r in results if r.row["id"] in ours])
    for endpoint in endpoints.values():
        if endpoint.get("changed") and (endpoint["failing_since"], endpoint["last_failure_at"]) != endpoint["was"]:
            webhook_deliveries.update_endpoint_health(conn, endpoint["id"], endpoint["failing_since"],
                                                      endpoint["last_failure_at"])
    for endpoint_id, (at, reason) in disable.items():
        dropped = webhooks.disable_endpoint(conn, endpoint_id, at, reason)
        log.error("endpoint disabled endpoint_id=whe_%s dropped=%s reason=%r", endpoint_id, dropped, reason)
    for result in results:
        _log(result, steps[result.row["id"]], result.row["id"] in ours)
    return list(disable)


def _log(result, step, ours):
    row, outcome = result.row, result.outcome
    fields = (f"event_id=msg_{row['event_id']} endpoint_id=whe_{row['endpoint_id']} attempt={row['attempt']} "
              f"reason={row['reason']} status_code={outcome.status_code} duration_ms={outcome.duration_ms}")
    state, due = step
    if not ours:
        log.warning("lease lost, outcome not recorded %s", fields)
    elif state == "succeeded":
        log.debug("delivered %s", fields)
    elif state == "pending":
        log.info("delivery failed, retrying %s next_attempt_at=%s error=%r", fields, due.isoformat(), outcome.error)
    elif state == "dropped":
        log.warning("delivery dropped, endpoint disabled %s error=%r", fields, outcome.error)
    else:
        log.error("delivery abandoned %s error=%r", fields, outcome.error)
