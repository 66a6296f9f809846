"""Identifiers in their real-world shapes: container numbers, air waybills, bills of lading, SSCCs."""
import string

_ISO6346_VALUES = {}
_value = 10
for _letter in string.ascii_uppercase:
    if _value % 11 == 0:  # ISO 6346 skips multiples of 11
        _value += 1
    _ISO6346_VALUES[_letter] = _value
    _value += 1
_ISO6346_VALUES.update({d: int(d) for d in string.digits})

# 32 characters without look-alikes, the same alphabet the database uses for references.
REFERENCE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
REFERENCE_SPACE = len(REFERENCE_ALPHABET) ** 4


def container_number(owner, serial):
    """An ISO 6346 number (owner code with category U, 6-digit serial, check digit)."""
    body = f"{owner}{serial % 1_000_000:06d}"
    total = sum(_ISO6346_VALUES[ch] * (2 ** i) for i, ch in enumerate(body))
    return body + str(total % 11 % 10)


def air_waybill(prefix, serial):
    """An air waybill number 'ppp-ssssssss' whose last digit is the serial modulo 7."""
    serial %= 10_000_000
    return f"{prefix}-{serial:07d}{serial % 7}"


def shipment_reference(day, index):
    """SHIP-<YYYYMMDD>-<4 characters>, unique per index below REFERENCE_SPACE.

    Multiplying by an odd constant modulo 2**20 is a bijection, so references look random
    yet never collide; the database's own generator would need a lookup per row.
    """
    code = (index * 0x9E3779B1 + 0x5A5A5) % REFERENCE_SPACE
    chars = []
    for _ in range(4):
        code, digit = divmod(code, 32)
        chars.append(REFERENCE_ALPHABET[digit])
    return f"SHIP-{day:%Y%m%d}-{''.join(chars)}"


def sscc(company, serial):
    """An 18-digit SSCC pallet number with its GS1 check digit."""
    body = f"3{company:07d}{serial % 1_000_000_000:09d}"
    backwards = body[::-1]  # weights 3, 1, 3, ... from the right
    total = 3 * sum(map(int, backwards[0::2])) + sum(map(int, backwards[1::2]))
    return body + str((10 - total % 10) % 10)


def bill_of_lading(carrier, rng):
    """A bill of lading number in the carrier's usual shape, sometimes typed with spaces or dashes."""
    digits = "".join(rng.choice(string.digits) for _ in range(9))
    shapes = {"Maersk": f"MAEU{digits}", "MSC": f"MEDU{digits[:2]}{rng.choice('ABCDEFGH')}{digits[2:8]}",
              "Hapag-Lloyd": f"HLCU{rng.choice(('VAP', 'CPT', 'SSZ'))}{digits[:8]}",
              "CMA CGM": f"CMDU{rng.choice(('CLV', 'ZCT', 'PEC'))}{digits[:7]}",
              "ONE": f"ONEY{rng.choice(('SCL', 'LIM'))}{digits[:8]}", "Evergreen": f"EGLV{digits[:12]}"}
    value = shapes.get(carrier, f"STR{digits[:7]}")
    if rng.random() < 0.15:
        # Typed by a person: the database stores it canonical.
        value = f"{value[:4].lower()} {value[4:8]}-{value[8:]}"
    return value


def seal_number(carrier, rng):
    """A container seal number."""
    return f"{carrier[:2].upper()}{rng.randrange(1_000_000, 9_999_999)}"


def voyage(rng):
    """A voyage code such as '412N' or 'FA524W'."""
    return rng.choice(("", "", "FA", "MA")) + f"{rng.randrange(100, 999)}{rng.choice('NSEW')}"


def ggn(rng):
    """A GLOBALG.A.P. number (13 digits)."""
    return f"40{rng.choice(('49928', '59883', '52852'))}{rng.randrange(0, 999_999):06d}"
