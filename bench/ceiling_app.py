"""The ceiling (not the service): the service's own page, its bytes held in memory and sent as they are.

Served by bench/floor.py under the service's own gunicorn settings (bench/floor_gunicorn.conf.py: its threaded
worker, 32 threads).
"""
import os
from pathlib import Path

from flask import Flask, Response

app = Flask(__name__)
# The bytes of GET /shipments?limit=100 as the service answered them once (bench/floor.py writes the file).
_BODY = Path(os.environ["CEILING_BODY"]).read_bytes()


@app.get("/shipments")
def shipments():
    """What gunicorn and Flask cost around a request whose answer costs nothing."""
    return Response(_BODY, mimetype="application/json")
