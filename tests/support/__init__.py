"""Helpers shared by the test modules: databases, row factories, the webhook receiver.

Fixtures live in tests/conftest.py; this package holds the plain code they (and tests) call.
"""
