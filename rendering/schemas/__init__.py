"""Marshmallow schemas: each resource of the spec, dumped for the API and the webhooks and described in /openapi.json."""
