"""Fixtures of the database tests: the server's URL (for a pooler or a proxy in front of it), empty databases."""
import pytest

from models import db


@pytest.fixture(scope="session")
def server_url(server):
    """URL of the PostgreSQL server the tests use."""
    return server.url


@pytest.fixture
def blank(server):
    """A factory of empty databases (no schema), dropped at the end."""
    made = []

    def make(label):
        url = server.create(label)
        made.append(url)
        return url
    yield make
    db.close_pool()
    for url in made:
        server.drop(url)
