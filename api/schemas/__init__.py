"""Marshmallow schemas: each resource of the spec, dumped by the API and described in /openapi.json."""
