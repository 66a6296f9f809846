"""The at-risk list as the engine makes it, without the summaries api/free_time.py keeps: what the tests compare with."""
from models import free_time, free_time_queries


def list_at_risk(conn, organization_id, now=None, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Summaries of the shipments whose demurrage is at risk, most urgent first, in one statement."""
    now = now or free_time_queries.utc_now()
    entries = [free_time.at_risk_entry(*free_time_queries.parse_facts(row["facts"]), now, window_days)
               for row in free_time_queries.at_risk_candidates(conn, organization_id, now, window_days)]
    return [summary for _key, summary in sorted((entry for entry in entries if entry is not None),
                                                key=lambda entry: entry[0])]
