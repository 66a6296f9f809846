"""The description (/openapi.json) and the API held to it from outside: validators, linters, Schemathesis,
a generated client, raw bytes to gunicorn, the /docs page in a browser."""
