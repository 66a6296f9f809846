"""The longest value the description (/openapi.json) allows for each parameter, percent-encoded as clients send it."""
import re
from urllib.parse import quote

from api.params import TIME_PATTERN
from rendering.ids import CHANGE_CURSOR_PATTERN

LONGEST_TIME = "9999-12-31T23:59:59.999999+23:59"
LONGEST_CURSOR = f"{2 ** 64 - 1}.{2 ** 63 - 1}"
# The longest UTF-8 character: 4 bytes, 12 once percent-encoded.
WIDEST_CHARACTER = "\U0001F951"


def encode(text):
    """Percent-encode as form clients do: RFC 3986 unreserved characters stay, everything else is %XX of UTF-8."""
    return quote(text, safe="")


def longest_comma_list(pattern, max_length):
    """The value of at most max_length characters matching a comma-list pattern with the longest encoding."""
    item = re.fullmatch(r"\^\((.*)\)\(,\(\1\)\)\*\$", pattern).group(1)
    # An id pattern's shortest number is one digit; a word list is its words.
    # (Words are regex-escaped in the pattern: `shipment\.status_changed`.)
    words = [re.sub(r"\\(.)", r"\1", re.sub(r"\[1-9\]\[0-9\]\{0,17\}", "1", word)) for word in item.split("|")]
    assert all(re.fullmatch(pattern, word) for word in words), words
    # Knapsack over characters: each further item costs len+1 characters (its comma) and len+3 bytes.
    best = {len(word): word for word in words}
    for length in range(1, max_length + 1):
        for word in words:
            previous = best.get(length - len(word) - 1)
            candidate = previous and f"{previous},{word}"
            if candidate and len(encode(candidate)) > len(encode(best.get(length, ""))):
                best[length] = candidate
    return max(best.values(), key=lambda value: len(encode(value)))


def longest_value(parameter):
    """The longest percent-encoded value the description allows for a query parameter."""
    schema = parameter["schema"]
    if schema.get("type") == "integer":
        return str(schema["maximum"])
    if "enum" in schema:
        return max(schema["enum"], key=lambda value: len(encode(value)))
    pattern = schema.get("pattern")
    if pattern == TIME_PATTERN:
        assert re.fullmatch(pattern, LONGEST_TIME)
        return LONGEST_TIME
    if pattern == CHANGE_CURSOR_PATTERN:
        assert re.fullmatch(pattern, LONGEST_CURSOR)
        return LONGEST_CURSOR
    if pattern == "^[^\\x00]*$":
        return WIDEST_CHARACTER * schema["maxLength"]
    if re.fullmatch(r"\^[a-z]{3}_\[1-9\]\[0-9\]\{0,17\}\$", pattern or ""):
        return pattern[1:4] + "_" + "9" * 18
    return longest_comma_list(pattern, schema["maxLength"])
