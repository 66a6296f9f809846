"""Every named statement in models/ is one PostgreSQL accepts, with its shared rules planned inside it.

A statement is named once, as a module-level constant ending in `_SQL` (or a models.db.Prepared); they
are collected here by that rule, so a new one cannot be forgotten, and each is prepared against the
fresh schema: a misspelt column or a broken join fails here, before a request meets it. A rule several
statements share is a function of schema.sql they call, which PostgreSQL must plan inside each of them.
"""
import importlib
import pkgutil
import re
from datetime import datetime, timezone

import psycopg2
import pytest

import models
from models import db, free_time_queries, shipments

# What PostgreSQL can PREPARE; the other statements (SET, CREATE TABLE IF NOT EXISTS) are run instead, in a
# transaction rolled back, with 1 for each parameter.
PREPARABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES")
# The type psycopg2 gives a parameter's Python value where PostgreSQL cannot infer it from the statement
# (a datetime is sent as a timestamptz literal, a timedelta as an interval, an int as an integer); any other
# is left to the server, as psycopg2's quoted strings are.
PARAMETER_TYPES = {"now": "timestamptz", "warn_after": "interval", "gap": "interval", "space": "integer"}


def named_statements():
    """{"models.module.NAME": text} of every `_SQL` string constant and every Prepared in models/."""
    found, seen = {}, set()
    for info in sorted(pkgutil.iter_modules(models.__path__), key=lambda info: info.name):
        module = importlib.import_module(f"models.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, db.Prepared):
                value = value.sql
            elif not (name.endswith("_SQL") and isinstance(value, str)):
                continue
            if value not in seen:
                seen.add(value)
                found[f"{module.__name__}.{name}"] = value
    return found


STATEMENTS = named_statements()
SCHEMA = db.SCHEMA_PATH.read_text()


def server_side(text):
    """Each statement of `text` as PostgreSQL's PREPARE takes it: `$n` parameters, and the types of the `$n`."""
    text = re.sub(r"--[^\n]*", "", text)
    assert "';'" not in text, "a literal semicolon: split the statements another way"
    for part in filter(None, (part.strip() for part in text.split(";"))):
        names = []
        part = re.sub(r"%\((\w+)\)s|%s(?!\w)", lambda match, names=names: _number(match, names), part)
        part = part.replace("%%", "%")
        yield part, [PARAMETER_TYPES.get(name, "unknown") for name in names]


def _number(match, names):
    # `%(name)s` is the same `$n` wherever it appears; each `%s` is a new one.
    key = match.group(1) or f"${len(names)}"
    if key not in names:
        names.append(key)
    return f"${names.index(key) + 1}"


def test_every_statement_is_collected():
    # The registry finds the statements by name: these are some of each kind it must hold.
    for name in ("models.shipments.LIST_SQL", "models.changes.FEED_SQL", "models.webhook_deliveries._CLAIM_DUE_SQL",
                 "models.rate_limits._RESERVE_SQL", "models.packing_lists.STORED_RENDERING_SQL",
                 "models.monitoring._GAUGES_SQL", "models.migrations.HISTORY_SQL", "models.events._STORE_SQL"):
        assert name in STATEMENTS
    assert len(STATEMENTS) >= 90


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_postgresql_prepares_the_statement(conn, name):
    with conn.cursor() as cur:
        try:
            for number, (part, types) in enumerate(server_side(STATEMENTS[name])):
                cur.execute("BEGIN")
                if part.upper().startswith(PREPARABLE):
                    declared = f" ({', '.join(types)})" if types else ""
                    cur.execute(f"PREPARE named_statement_{number}{declared} AS {part}")
                else:
                    cur.execute(re.sub(r"\$[0-9]+", "1", part))
                cur.execute("ROLLBACK")
        except psycopg2.Error as error:
            pytest.fail(f"{name}: {error.pgerror or error}")


def words(text):
    """`text` with its whitespace and line breaks folded, to compare statements written out twice."""
    return " ".join(text.replace("(\n", "( ").split())


def test_free_time_facts_read_the_milestones_the_engine_reads():
    listed = ", ".join(f"'{milestone}'" for milestone in free_time_queries.EVENT_MILESTONES)
    assert f"v.milestone IN ( {listed})" in words(function_body("free_time_facts"))


def function_body(name):
    """The text of the function `name` of schema.sql, from its name to the end of its body."""
    return SCHEMA.split(f"CREATE OR REPLACE FUNCTION {name}(", 1)[1].split("\n$$;", 1)[0]


# Statements that call a function of schema.sql in FROM (a rule they share), with values to plan them with.
CALLERS = {
    "models.shipments.RENDERED_PAGE_SQL": {**dict.fromkeys(shipments.FILTERS), **shipments.search_params(None),
                                           "organization_id": 1, "limit": 10, "api_version": "v", "renderer": "r"},
    "models.shipments.LIST_SQL": {"organization_id": 1, "limit": 2, "shipment_id": None, "shipment_ids": [1, 2]},
    "models.free_time_queries.FACTS_SQL": {"organization_id": 1, "ids": [1]},
    "models.free_time_queries.AT_RISK_SQL": {"organization_id": 1, "now": datetime.now(timezone.utc),
                                             "window_days": 45},
    "models.tokens.PRINCIPAL_SQL": {"fingerprint": bytes(32)},
}


@pytest.mark.parametrize("name", sorted(CALLERS))
def test_a_shared_rule_is_planned_inside_the_statement_that_calls_it(conn, name):
    # LANGUAGE sql, STABLE, neither STRICT nor SECURITY DEFINER nor SET: PostgreSQL inlines such a function,
    # so the caller is planned as if the rule were written out in it; any other is a Function Scan, planned
    # blind to the caller's values and indexes.
    called = re.findall(r"\bFROM (\w+)\(", STATEMENTS[name])
    assert called and all(f"CREATE OR REPLACE FUNCTION {function}(" in SCHEMA for function in called)
    with conn.cursor() as cur:
        cur.execute("EXPLAIN (COSTS OFF) " + STATEMENTS[name], CALLERS[name])
        plan = "\n".join(row["QUERY PLAN"] for row in cur.fetchall())
    assert not [function for function in called if f"Function Scan on {function}" in plan], plan


# The statements that ask visible_to (schema.sql) whether a shipment is visible to an organization, and values
# for every parameter they name.
ASKING = sorted(name for name, text in STATEMENTS.items() if "visible_to(" in text)
ASKING_VALUES = {"organization_id": 1, "shipment_id": 1, "document_id": 1, "api_version": "v", "renderer": "r",
                 "statuses": ["failed"], "limit": 10, "include_resolved": False, "after_xid": "0", "after_id": 0,
                 **dict.fromkeys(("starting_after", "alert_id", "event_id", "types", "created_after", "created_before",
                                  "delivery_success"))}


def plan(conn, text, params, verbose=False):
    """PostgreSQL's plan of a statement, without costs."""
    rows = db.execute_all(conn, f"EXPLAIN (COSTS OFF{', VERBOSE' if verbose else ''}) {text}", params)
    return "\n".join(row["QUERY PLAN"] for row in rows)


def written_out(text):
    """`text` with each call of visible_to replaced by the rule of its body, written out."""
    rule = words(function_body("visible_to")).split(" SELECT ", 1)[1]

    def rule_for(call):
        row, organization_id = call.groups()
        return "(" + re.sub(r"\bs\.", f"{row}.", rule.replace("visible_to.organization_id",
                                                                f"({organization_id})::bigint")) + ")"
    return re.sub(r"visible_to\((\w+), ((?:[^()]|\([^()]*\))+)\)", rule_for, text)


@pytest.mark.parametrize("name", ASKING)
def test_asking_visible_to_plans_as_the_rule_written_out(conn, name):
    # IMMUTABLE, one expression of the row's columns: inlined, the caller's conditions hold the columns, so
    # its indexes (the partial ones on visible shipments too) serve it as they would the rule written out.
    assert "awaiting_approval" not in STATEMENTS[name] and "visible_to" not in written_out(STATEMENTS[name])
    assert plan(conn, STATEMENTS[name], ASKING_VALUES) == plan(conn, written_out(STATEMENTS[name]), ASKING_VALUES)


@pytest.mark.parametrize("name", sorted(set(ASKING) | set(CALLERS)))
def test_no_plan_calls_visible_to(conn, name):
    # Asked directly or by a function of schema.sql the statement calls (shipment_page, free_time_facts, ...).
    assert "visible_to" not in plan(conn, STATEMENTS[name], CALLERS.get(name, ASKING_VALUES), verbose=True)


PREPARED = {f"{module}.{name}": value for module, name, value in (
    (info.name, name, value) for info in pkgutil.iter_modules(models.__path__)
    for name, value in vars(importlib.import_module(f"models.{info.name}")).items())
    if isinstance(value, db.Prepared)}


@pytest.mark.parametrize("name", sorted(PREPARED))
def test_a_prepared_statement_prepares_as_models_db_sends_it(conn, name):
    # models.cursors.Prepared makes its own PREPARE (names and `$n` of its own): the one requests send.
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(PREPARED[name].prepare_sql)
        cur.execute("ROLLBACK")



def test_the_active_token_rule_is_written_once():
    # Written out anywhere else (a statement of models/ or another function of schema.sql), the two could come
    # to disagree: `tokens list` saying "active" of a token every request refuses, or the count of active
    # tokens letting an eleventh be made.
    elsewhere = {**STATEMENTS, **{name: function_body(name) for name in re.findall(
        r"CREATE OR REPLACE FUNCTION (\w+)\(", SCHEMA) if name != "token_state"}}
    assert [name for name, text in elsewhere.items() if re.search(r"expires_at\s*(>|<=)\s*now\(\)", text)] == []
    assert sorted(name for name, text in elsewhere.items() if "token_state(" in text) == [
        "models.tokens._ACTIVE_COUNT_SQL", "models.tokens._LIST_SQL", "token_principal"]


@pytest.mark.parametrize("name", ["models.tokens.PRINCIPAL_SQL", "models.tokens._ACTIVE_COUNT_SQL",
                                  "models.tokens._LIST_SQL"])
def test_no_plan_calls_token_state(conn, name):
    # LANGUAGE sql, STABLE, one expression of the row's columns: inlined, as if the rule were written out there
    # (token_principal, which PRINCIPAL_SQL calls, is inlined too, and token_state inside it).
    assert "token_state" not in plan(conn, STATEMENTS[name], {"fingerprint": bytes(32), "organization_id": 1,
                                                              "user_id": None}, verbose=True)
