"""Helpers shared by the test modules: databases, row factories, the webhook receiver.

Fixtures live in conftest.py files (tests/conftest.py and each folder's own); this package holds the
plain code they and the tests call. No test module imports another one: what two modules share is here.
"""
from pathlib import Path

# The checkout: where schema.sql, gunicorn.conf.py and dev.py are, and the working directory of child processes.
ROOT = Path(__file__).resolve().parents[2]
