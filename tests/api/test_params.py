"""Query parameters of GET /shipments, input by input (the table in docs/parameters.md).

The matrix is large, so it runs against one database per module (`shared`), filled once.
"""
import pytest

from tests.support.factories import auth, make_container, make_label, make_org, make_shipment, make_token

VERSION = "2026-10-01"
STATUSES = ("draft", "validated", "in_transit", "arrived", "in_warehouse", "error")


@pytest.fixture(scope="module")
def shared(module_database):
    """One database, app and token for a whole module; shipments s1..s6 (ids 1..6), one per status."""
    with module_database() as (conn, app):
        org_id = make_org(conn, "acme")
        token = make_token(conn, org_id)
        ids = []
        for day, status in enumerate(STATUSES, start=1):
            ids.append(make_shipment(conn, org_id, status=status, reference=f"R-{day}",
                                     created_at=f"2026-03-0{day}T12:00:00Z",
                                     eta=f"2026-04-0{day}T12:00:00Z" if day % 2 else None))
        make_container(conn, ids[1], eta="2026-04-02T06:00:00Z")
        red = make_label(conn, org_id, "red", shipment_ids=ids[:3])
        blue = make_label(conn, org_id, "blue", shipment_ids=ids[1:2])
        yield {"client": app.test_client(), "token": token, "ids": ids, "conn": conn,
               "labels": {"red": red, "blue": blue}}


def get(shared, query):
    """GET /shipments?<query> with the shared token."""
    return shared["client"].get(f"/shipments?{query}", headers=auth(shared["token"]))


def listed(response):
    """The shipment numbers of a 200 list response (shp_4 -> 4), asserting the envelope."""
    assert response.status_code == 200, response.json
    assert set(response.json) == {"object", "data", "has_more"}
    assert response.json["object"] == "list"
    assert response.headers["Service-Version"] == VERSION
    return [int(item["id"].removeprefix("shp_")) for item in response.json["data"]]


def assert_invalid(response, param, message):
    assert response.status_code == 400
    assert response.json == {"error": {"type": "invalid_request_error", "code": "invalid_parameter",
                                       "message": message, "param": param}}
    assert response.headers["Service-Version"] == VERSION
    assert response.headers["Content-Type"] == "application/json"


ACTIVE = [6, 5, 4, 3, 2, 1]
LIMIT_MESSAGE = "limit must be an integer from 1 to 100, written in decimal digits."


# --- limit: 1 to 3 ASCII decimal digits, value 1..100 ---------------------------------------

@pytest.mark.parametrize("raw, size", [
    ("1", 1), ("5", 5), ("05", 5), ("005", 5), ("099", 6), ("100", 6), ("25", 6), ("6", 6),
])
def test_limit_accepted(shared, raw, size):
    response = get(shared, f"limit={raw}")
    assert listed(response) == ACTIVE[:size]
    assert response.json["has_more"] is (size < 6)


def test_limit_default_is_25(shared):
    assert listed(get(shared, "")) == ACTIVE


@pytest.mark.parametrize("raw", [
    "0", "00", "000", "101", "0100", "1000", "999", "-1", "-0", "%2B5", "+5", "%205", "5%20", "5.0", "5.",
    "1e1", "1E1", "0x10", "0o7", "0b1", "1_0", "", "%D9%A5", "%EF%BC%95", "%E2%91%A4", "five", "1,0", "5%0A",
    "%095", "1/2", "Infinity", "NaN", "null", "true", "[5]",
])
def test_limit_rejected(shared, raw):
    assert_invalid(get(shared, f"limit={raw}"), "limit", LIMIT_MESSAGE)


@pytest.mark.parametrize("query, expected", [
    ("limit=abc&limit=2", ACTIVE[:2]),
    ("limit=2&limit=3", ACTIVE[:3]),
])
def test_repeated_limit_uses_the_last(shared, query, expected):
    assert listed(get(shared, query)) == expected


def test_repeated_limit_last_invalid(shared):
    assert_invalid(get(shared, "limit=2&limit=0"), "limit", LIMIT_MESSAGE)


# --- starting_after: shp_<positive integer, no leading zero, up to 18 digits> -----------------

@pytest.mark.parametrize("raw, expected", [
    ("shp_4", [3, 2, 1]),
    ("shp_1", []),
    ("shp_7", ACTIVE),                      # well formed, no such shipment: the keyset still applies
    ("shp_999999999999999999", ACTIVE),     # 18 digits
    ("", ACTIVE),                           # empty value: omitted
])
def test_starting_after_accepted(shared, raw, expected):
    assert listed(get(shared, f"starting_after={raw}")) == expected


@pytest.mark.parametrize("raw", [
    "shp_0", "shp_04", "shp_-4", "shp_%2B4", "shp_4.0", "shp_4e0", "shp_", "shp", "4", "SHP_4", "Shp_4",
    "alr_4", "chk_4", "lbl_4", "ctr_4", "shp__4", "shp_4x", "shp_4%20", "%20shp_4", "shp_4,shp_3",
    "shp_1234567890123456789", "shp_%D9%A4", "shp_0x4",
])
def test_starting_after_rejected(shared, raw):
    assert_invalid(get(shared, f"starting_after={raw}"), "starting_after",
                   "starting_after must be an id of the form shp_<positive integer>.")


# --- status: comma-separated, last occurrence, no `error` -------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("draft", [1]),
    ("in_transit,draft", [3, 1]),
    ("draft,draft", [1]),
    ("draft,validated,in_transit,arrived,in_warehouse", [5, 4, 3, 2, 1]),
    ("", ACTIVE),                      # empty: all statuses (error included)
])
def test_status_accepted(shared, raw, expected):
    assert listed(get(shared, f"status={raw}")) == expected


@pytest.mark.parametrize("raw, bad", [
    ("error", "error"), ("draft,error", "error"), ("DRAFT", "DRAFT"), ("Draft", "Draft"),
    ("draft,", ""), (",draft", ""), ("draft,,arrived", ""), ("draft,%20arrived", " arrived"),
    ("draft%20", "draft "), ("in-transit", "in-transit"), ("all", "all"), ("%2A", "*"),
])
def test_status_rejected(shared, raw, bad):
    assert_invalid(get(shared, f"status={raw}"), "status",
                   f"status has an unknown value {bad!r}; allowed: draft, validated, in_transit, arrived, "
                   "in_warehouse.")


def test_repeated_status_uses_the_last(shared):
    assert listed(get(shared, "status=draft&status=arrived")) == [4]
    assert listed(get(shared, "status=error&status=arrived")) == [4]


# --- archived: false (default), true, any ----------------------------------------------------

@pytest.mark.parametrize("raw", ["true", "any", "false", ""])
def test_archived_accepted(shared, raw):
    assert listed(get(shared, f"archived={raw}")) == ([] if raw == "true" else ACTIVE)


@pytest.mark.parametrize("raw", ["TRUE", "True", "1", "0", "yes", "no", "all", "none", "false%20", "t"])
def test_archived_rejected(shared, raw):
    assert_invalid(get(shared, f"archived={raw}"), "archived", "archived must be one of: false, true, any.")


# --- labels: comma-separated lbl_ ids, all of them -------------------------------------------

def test_labels_accepted(shared):
    red, blue = shared["labels"]["red"], shared["labels"]["blue"]
    assert listed(get(shared, f"labels=lbl_{red}")) == [3, 2, 1]
    assert listed(get(shared, f"labels=lbl_{red},lbl_{blue}")) == [2]
    assert listed(get(shared, f"labels=lbl_{blue},lbl_{red},lbl_{blue}")) == [2]
    assert listed(get(shared, "labels=lbl_999")) == []
    assert listed(get(shared, "labels=")) == ACTIVE


@pytest.mark.parametrize("raw", [
    "lbl_0", "lbl_01", "shp_1", "LBL_1", "lbl_", "1", "lbl_1,", ",lbl_1", "lbl_1,,lbl_2", "lbl_1%20,lbl_2",
    "lbl_1;lbl_2", "lbl_1%20lbl_2", "lbl_1234567890123456789", "red",
])
def test_labels_rejected(shared, raw):
    assert_invalid(get(shared, f"labels={raw}"), "labels",
                   "labels must be a comma-separated list of lbl_<positive integer> ids.")


# --- time parameters: ISO 8601 date-time or bare date ------------------------------------------
# s1..s6 were created at 2026-03-0<n>T12:00:00Z.

@pytest.mark.parametrize("raw, expected", [
    ("2026-03-03", [6, 5, 4, 3]),                         # midnight UTC
    ("2026-03-03T12:00:00Z", [6, 5, 4, 3]),               # inclusive
    ("2026-03-03T12:00:01Z", [6, 5, 4]),
    ("2026-03-03T12:00:00.000001Z", [6, 5, 4]),
    ("2026-03-03T12:00Z", [6, 5, 4, 3]),                  # seconds may be left out
    ("2026-03-03T12:00:00", [6, 5, 4, 3]),                # no offset: UTC
    ("2026-03-03T14:00:00%2B02:00", [6, 5, 4, 3]),        # offset, '+' encoded
    ("2026-03-03T14:00:00+02:00", [6, 5, 4, 3]),          # '+' unencoded arrives as a space
    ("2026-03-03T14:00:00%2B0200", [6, 5, 4, 3]),
    ("2026-03-03T14:00:00%2B02", [6, 5, 4, 3]),
    ("2026-03-03T07:00:00-05:00", [6, 5, 4, 3]),
    ("2026-03-03T07:00:01-05:00", [6, 5, 4]),
])
def test_time_accepted(shared, raw, expected):
    assert listed(get(shared, f"created_after={raw}")) == expected


TIME_REJECTED = [
    "2026-3-3", "20260303", "2026/03/03", "03/03/2026", "2026-03-03%2012:00:00", "2026-03-03t12:00:00z",
    "2026-03-03T12:00:00z", "2026-13-01", "2026-02-30", "2026-00-10", "2026-03-03T24:00:00Z",
    "2026-03-03T12:60:00Z", "2026-03-03T12", "2026-03-03T12:00:00%2B25:00", "2026-03-03T12:00:00.1234567Z",
    "2026-W10", "2026-062", "%2B2026-03-03", "2026-03-03T12:00:00Z[UTC]", "yesterday", "now", "1772539200",
    "2026-03-03T12:00:00UTC", "2026-03-03T12:00:00%20Z", "%D9%A2%D9%A0%D9%A2%D9%A6-03-03", "0000-01-01",
    "2026-03", "2026",
]


@pytest.mark.parametrize("param", ["created_after", "created_before", "eta_after", "eta_before"])
@pytest.mark.parametrize("raw", TIME_REJECTED)
def test_time_rejected(shared, param, raw):
    assert_invalid(get(shared, f"{param}={raw}"), param,
                   f"{param} must be an ISO 8601 date-time or a date (YYYY-MM-DD).")


# Offsets from -23:59 to +23:59 are converted to UTC in Python: PostgreSQL itself rejects offsets
# beyond 15:59, which once made these a 500. Each value below means 2026-03-03T12:00:00Z (s3) or
# the edge of the years 1 to 9999.
TIME_MATRIX = [
    ("2026-03-03T20:00:00%2B08:00", [6, 5, 4, 3]),
    ("2026-03-04T03:59:00%2B15:59", [6, 5, 4, 3]),
    ("2026-03-04T04:00:00%2B16:00", [6, 5, 4, 3]),
    ("2026-03-04T04:00:00+16:00", [6, 5, 4, 3]),           # '+' unencoded arrives as a space
    ("2026-03-04T04:00:00%2B1600", [6, 5, 4, 3]),
    ("2026-03-04T04:00:00%2B16", [6, 5, 4, 3]),
    ("2026-03-04T11:59:00%2B23:59", [6, 5, 4, 3]),
    ("2026-03-04T11:59%2B2359", [6, 5, 4, 3]),
    ("2026-03-02T20:01:00-15:59", [6, 5, 4, 3]),
    ("2026-03-02T20:00:00-16:00", [6, 5, 4, 3]),
    ("2026-03-02T12:01:00-23:59", [6, 5, 4, 3]),
    ("2026-03-03T12:00:00-00:00", [6, 5, 4, 3]),
    ("2026-03-04T04:00:00.000000%2B16:00", [6, 5, 4, 3]),
    ("2026-03-04T03:59:59.5%2B16:00", [6, 5, 4, 3]),        # rounds up to the shown 12:00:00
    ("2026-03-04T04:00:00.000001%2B16:00", [6, 5, 4]),
    ("2026-03-02T12:01:00.000001-23:59", [6, 5, 4]),
    ("0001-01-01", [6, 5, 4, 3, 2, 1]),
    ("0001-01-01T00:00:00Z", [6, 5, 4, 3, 2, 1]),
    ("0001-01-01T00:00:00-23:59", [6, 5, 4, 3, 2, 1]),
    ("9999-12-31", []),
    ("9999-12-31T23:59:59.999999Z", []),
    ("9999-12-31T23:59:59.999999%2B23:59", []),
]


@pytest.mark.parametrize("raw, expected", TIME_MATRIX)
def test_time_offsets_and_edges_accepted(shared, raw, expected):
    assert listed(get(shared, f"created_after={raw}")) == expected


@pytest.mark.parametrize("param", ["created_after", "created_before", "eta_after", "eta_before"])
@pytest.mark.parametrize("raw", [raw for raw, _expected in TIME_MATRIX])
def test_time_offsets_and_edges_never_fail(shared, param, raw):
    assert get(shared, f"{param}={raw}").status_code == 200


@pytest.mark.parametrize("param", ["created_after", "created_before", "eta_after", "eta_before"])
@pytest.mark.parametrize("raw", [
    "2026-03-03T12:00:00%2B24:00", "2026-03-03T12:00:00-24:00", "2026-03-03T12:00:00%2B23:60",
    "2026-03-03T12:00:00%2B00:60", "2026-03-03T12:00:00%2B2400", "2026-03-03T12:00:00%2B99",
    "2026-03-03T12:00:00%2B1", "2026-03-03T12:00:00%2B123", "2026-03-03T12:00:00%2B16:00:00",
    "2026-03-03T12:00:00%2B16:00:00.5",
])
def test_time_offset_out_of_range_rejected(shared, param, raw):
    assert_invalid(get(shared, f"{param}={raw}"), param,
                   f"{param} must be an ISO 8601 date-time or a date (YYYY-MM-DD).")


@pytest.mark.parametrize("param", ["created_after", "created_before", "eta_after", "eta_before"])
@pytest.mark.parametrize("raw", [
    "0001-01-01T00:00:00%2B00:01", "0001-01-01T15:59:00%2B16:00", "0001-01-01T00:00:00.999999%2B23:59",
    "9999-12-31T23:59:59-00:01", "9999-12-31T08:00:00-16:00",
])
def test_time_outside_years_1_to_9999_in_utc_rejected(shared, param, raw):
    assert_invalid(get(shared, f"{param}={raw}"), param,
                   f"{param} must fall between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once converted "
                   f"to UTC.")


@pytest.mark.parametrize("param", ["created_after", "created_before", "eta_after", "eta_before"])
def test_time_empty_is_omitted(shared, param):
    assert listed(get(shared, f"{param}=")) == ACTIVE


# --- q ------------------------------------------------------------------------------------------

def test_q_empty_means_no_search(shared):
    assert listed(get(shared, "q=")) == ACTIVE


def test_q_too_long_or_nul(shared):
    message = "q must be at most 500 characters, without NUL."
    assert_invalid(get(shared, "q=" + "x" * 501), "q", message)
    assert_invalid(get(shared, "q=a%00"), "q", message)
    assert listed(get(shared, "q=" + "x" * 500)) == []


# --- array and hash forms of single-value parameters -----------------------------------------

@pytest.mark.parametrize("param", ["q", "status", "labels", "archived", "created_after", "created_before",
                                   "eta_after", "eta_before", "limit", "starting_after"])
@pytest.mark.parametrize("form", ["{p}[]=draft", "{p}[a]=1", "{p}[0]=1", "{p}[]=", "{p}=5&{p}[]=5",
                                  "{p}%5B%5D=x", "{p}[a][b]=1"])
def test_array_and_hash_forms_rejected(shared, param, form):
    assert_invalid(get(shared, form.format(p=param)), param,
                   f"{param} takes a single value; array and hash forms such as {param}[] are not accepted.")


# --- unknown parameters are ignored -----------------------------------------------------------

@pytest.mark.parametrize("query", [
    "foo=bar", "foo[]=1", "foo[a]=1", "LIMIT=0", "Limit=abc", "Status=nope", "expand[]=containers",
    "page=2", "offset=-1", "ending_before=shp_0", "status_=x", "limit_=0", "=5", "&&", "limit",
    "q%00=1", "%FF=1", "a=1&a=2",
])
def test_unknown_parameters_ignored(shared, query):
    if query == "limit":
        # A bare `limit` (no '=') has the empty value, which limit does not accept.
        assert_invalid(get(shared, query), "limit", LIMIT_MESSAGE)
        return
    assert listed(get(shared, query)) == ACTIVE


@pytest.mark.parametrize("path", ["/organization", "/shipments/shp_1"])
def test_parameters_of_other_endpoints_are_ignored(shared, path):
    response = shared["client"].get(f"{path}?limit=0&status[]=x&q[a]=1&starting_after=nope",
                                    headers=auth(shared["token"]))
    assert response.status_code == 200
