"""Quality checks as the API shows them: the current result of each check of a visible shipment."""
from models.db import execute_all

# list_checks: current checks with the given statuses on shipments the API shows (archived
# included), newest first (keyset on id); served by checks_list_idx.
LIST_SQL = """
SELECT c.id, c.shipment_id, s.reference AS shipment_reference, c.key, c.category, c.status,
       c.title, c.message, c.ran_at
  FROM checks c
  JOIN shipments s ON s.id = c.shipment_id
 WHERE c.organization_id = %(organization_id)s
   AND visible_to(s, %(organization_id)s)
   AND c.status = ANY (%(statuses)s::text[])
   AND (%(shipment_id)s::bigint IS NULL OR c.shipment_id = %(shipment_id)s)
   AND (%(starting_after)s::bigint IS NULL OR c.id < %(starting_after)s)
 ORDER BY c.id DESC
 LIMIT %(limit)s
"""


def list_checks(conn, organization_id, limit, statuses, shipment_id=None, starting_after=None):
    """Up to `limit` checks whose status is one of `statuses`, newest first."""
    params = {"organization_id": organization_id, "limit": limit, "statuses": list(statuses),
              "shipment_id": shipment_id, "starting_after": starting_after}
    return execute_all(conn, LIST_SQL, params)
