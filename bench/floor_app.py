"""The floor (not the service): the same 100 shipment rows as one json_agg, its text passed through."""
import os

import psycopg2
from flask import Flask, Response

app = Flask(__name__)
_conn = None

PAGE_SQL = """
SELECT json_build_object('object', 'list', 'data', coalesce(json_agg(s ORDER BY s.id DESC), '[]'),
                         'has_more', true)::text
  FROM (SELECT * FROM shipments WHERE organization_id = %s AND NOT archived AND NOT awaiting_approval
           AND NOT owned_elsewhere ORDER BY id DESC LIMIT 100) s
"""


@app.get("/shipments")
def shipments():
    global _conn
    if _conn is None:            # one connection per worker process (sync workers: one request at a time)
        _conn = psycopg2.connect(os.environ["DATABASE_URL"])
        _conn.autocommit = True
    with _conn.cursor() as cur:
        cur.execute(PAGE_SQL, (int(os.environ["FLOOR_ORGANIZATION"]),))
        return Response(cur.fetchone()[0], mimetype="application/json")
