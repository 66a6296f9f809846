"""Turning attempt outcomes into rows: the delivery's next step, the attempt log, endpoint health."""
import logging

from api.ids import PREFIXES, format_id
from delivery import retry
from delivery.secret_key import NOT_SENT
from models import endpoint_health, webhook_deliveries, webhooks

log = logging.getLogger("delivery")


def _health(endpoints, results):
    """Replay failures in time order over each endpoint's failure run; returns endpoints to disable."""
    disable = {}
    for result in sorted(results, key=lambda r: r.finished_at):
        if result.delivery.reason == "test" or result.outcome.error == NOT_SENT:
            continue  # a test event never counts toward disabling, nor a secret this process cannot open
        endpoint = endpoints.get(result.delivery.endpoint_id)
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
    delivery, outcome = result.delivery, result.outcome
    if outcome.succeeded:
        return "succeeded", None
    if delivery.reason != "test" and not endpoint_enabled:
        return "dropped", None
    due = retry.next_attempt_at(delivery.attempt, result.finished_at, delivery.max_attempts)
    return ("pending", due) if due is not None else ("failed", None)


def record(conn, results):
    """Record a batch of results in the caller's transaction; returns the endpoint ids disabled now."""
    if not results:
        return []
    end_runs = ()
    if any(not r.outcome.succeeded and r.delivery.reason != "test" for r in results):
        endpoints = webhook_deliveries.lock_endpoints(conn, {r.delivery.endpoint_id for r in results})
        disable = _health(endpoints, results)
    else:
        # Only successes: no lock needed, a success just ends any failure run (in the finishing statement).
        end_runs = {r.delivery.endpoint_id for r in results if r.delivery.reason != "test"}
        endpoints = {r.delivery.endpoint_id: {"enabled": True} for r in results}
        disable = {}
    finish, steps = [], {}
    for result in results:
        delivery, outcome = result.delivery, result.outcome
        endpoint = endpoints.get(delivery.endpoint_id)
        state, due = _next_step(result, endpoint is not None and endpoint["enabled"])
        steps[delivery.id] = (state, due)
        # Every attempt row gets what its request really gave, even when the lease was lost meanwhile.
        finish.append((delivery.id, str(delivery.lease_token), delivery.attempt, state, due, outcome.status_code,
                       outcome.error, None if state == "pending" else result.finished_at, delivery.attempt_id,
                       result.attempted_at, outcome.duration_ms, outcome.succeeded, outcome.response_body,
                       outcome.address))
    ours = webhook_deliveries.finish(conn, finish, end_runs)
    for endpoint in endpoints.values():
        if endpoint.get("changed") and (endpoint["failing_since"], endpoint["last_failure_at"]) != endpoint["was"]:
            endpoint_health.update_endpoint_health(conn, endpoint["id"], endpoint["failing_since"],
                                                   endpoint["last_failure_at"])
    for endpoint_id, (at, reason) in disable.items():
        dropped = webhooks.disable_endpoint(conn, endpoint_id, at, reason)
        log.error("endpoint disabled endpoint_id=%s dropped=%s reason=%r",
                  format_id(PREFIXES["webhook_endpoint"], endpoint_id), dropped, reason)
    for result in results:
        _log(result, steps[result.delivery.id], result.delivery.id in ours)
    return list(disable)


def _log(result, step, ours):
    if ours and step[0] == "succeeded" and not log.isEnabledFor(logging.DEBUG):
        return  # the common case: nothing to log, and the fields cost more than the rest of recording
    if ours and step[0] == "pending" and result.outcome.error == NOT_SENT:
        return  # said once per endpoint when it was met (services.ClaimingAndSending), not per attempt
    delivery, outcome = result.delivery, result.outcome
    fields = (f"event_id={format_id(PREFIXES['webhook_event'], delivery.event_id)} "
              f"endpoint_id={format_id(PREFIXES['webhook_endpoint'], delivery.endpoint_id)} "
              f"attempt={delivery.attempt} reason={delivery.reason} status_code={outcome.status_code} "
              f"duration_ms={outcome.duration_ms}")
    state, due = step
    if not ours:
        log.warning("lease lost, outcome kept in the attempt log only %s", fields)
    elif state == "succeeded":
        log.debug("delivered %s", fields)
    elif state == "pending":
        log.info("delivery failed, retrying %s next_attempt_at=%s error=%r", fields, due.isoformat(), outcome.error)
    elif state == "dropped":
        log.warning("delivery dropped, endpoint disabled %s error=%r", fields, outcome.error)
    else:
        log.error("delivery abandoned %s error=%r", fields, outcome.error)
