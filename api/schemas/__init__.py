"""Marshmallow schemas of the API alone: the query parameters it reads, its error body and list envelope."""
