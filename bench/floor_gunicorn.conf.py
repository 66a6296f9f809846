"""gunicorn settings of bench/floor_app.py and bench/ceiling_app.py: the service's gunicorn.conf.py (its worker,
threads, access log, limits and hooks), but for a worker's start, where the service builds its MCP server
from its own routes, which these apps do not have.

    gunicorn -c bench/floor_gunicorn.conf.py bench.floor_app:app   # from the project's root, as bench/floor.py does
"""
import runpy
from pathlib import Path

SERVICE = Path(__file__).resolve().parent.parent / "gunicorn.conf.py"
globals().update((name, value) for name, value in runpy.run_path(str(SERVICE)).items() if not name.startswith("__"))


def post_worker_init(worker):
    """Each wait for the database held to DATABASE_CLIENT_TIMEOUT, as in the service's workers (models/deadline.py)."""
    from config import load_config
    from models import deadline

    deadline.install(load_config()["DATABASE_CLIENT_TIMEOUT"])
