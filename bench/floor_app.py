"""The floor (not the service): the same 100 shipment rows as one json_agg, its text passed through.

Served by bench/floor.py under the service's own gunicorn settings (bench/floor_gunicorn.conf.py: its threaded
worker, 32 threads), so requests run at once in a worker: each takes a connection of its own from a small pool.
"""
import os

import psycopg2
from flask import Flask, Response

app = Flask(__name__)
# Connections not in use. list.pop and list.append are atomic, so threads share it without a lock; the
# worker lets at most DATABASE_POOL_SIZE requests into the application at once, so it holds no more.
_idle = []

PAGE_SQL = """
SELECT json_build_object('object', 'list', 'data', coalesce(json_agg(s ORDER BY s.id DESC), '[]'),
                         'has_more', true)::text
  FROM (SELECT * FROM shipments WHERE organization_id = %s AND NOT archived AND NOT awaiting_approval
           AND NOT owned_elsewhere ORDER BY id DESC LIMIT 100) s
"""


def page_text():
    """The page's JSON text, read on a connection no other thread is using."""
    try:
        conn = _idle.pop()
    except IndexError:
        conn = psycopg2.connect(os.environ["DATABASE_URL"])
        conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(PAGE_SQL, (int(os.environ["FLOOR_ORGANIZATION"]),))
            return cur.fetchone()[0]
    finally:
        _idle.append(conn)


@app.get("/shipments")
def shipments():
    """What the database's own JSON of the page costs, passed through gunicorn and Flask."""
    return Response(page_text(), mimetype="application/json")
