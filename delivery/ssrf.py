"""The SSRF guard: which webhook URLs may be called, and the address to connect to.

A URL is checked when saved and again before every delivery; the sender then
connects to the checked address only (no second DNS lookup).  A host is refused
when any of its addresses is not public: a mixed answer is how DNS rebinding hides.
"""
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

ALLOW_SETTING = "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS"

_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
# Ranges Python's ipaddress may still call global on some versions.
_EXTRA_RESERVED = tuple(ipaddress.ip_network(n) for n in (
    "192.88.99.0/24",  # deprecated 6to4 relay anycast
    "192.0.0.0/24",    # IETF protocol assignments
    "5f00::/16",       # IPv6 segment routing
    "2001:20::/28",    # ORCHIDv2
    "3fff::/20",       # documentation
))
# Shortest prefixes accepted in the allow-list: anything wider is a catch-all.
_MIN_PREFIX = {4: 8, 6: 16}


class RefusedUrl(ValueError):
    """A webhook URL that must not be called; the message says why and what would allow it."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect, and what to present as host name."""

    host: str
    port: int
    path: str
    address: str


def allowed_networks(setting):
    """Parse the allow-list setting (a list or a comma-separated string); refuses catch-all networks."""
    if not setting:
        return ()
    items = setting.split(",") if isinstance(setting, str) else setting
    networks = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        network = ipaddress.ip_network(item, strict=False)
        if network.prefixlen < _MIN_PREFIX[network.version]:
            raise ValueError(f"{ALLOW_SETTING}: {network} is a catch-all network; name the local networks "
                             f"of your test receivers instead (for example 127.0.0.1/32)")
        networks.append(network)
    return tuple(networks)


def embedded_ipv4(address):
    """The IPv4 address carried by an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 address, else None."""
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address))  # deprecated IPv4-compatible ::a.b.c.d
    return None


def address_class(address):
    """None for a public address, else the class that makes it non-public."""
    inner = embedded_ipv4(address)
    if inner is not None:
        found = address_class(inner)
        if found is not None:
            return found
        if address.version == 6 and address.ipv4_mapped is None and address not in _NAT64[0]:
            return "reserved"  # IPv4 tunnelled in IPv6 other than mapped / well-known NAT64
        return None
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared", address in _SHARED),
        ("reserved", address.is_reserved or any(address in n for n in _EXTRA_RESERVED)),
        ("private", address.is_private),
    )
    for name, hit in checks:
        if hit:
            return name
    return None if address.is_global else "non-public"


def resolve(host, port):
    """Every address `host` resolves to (an IP literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise RefusedUrl(f"host {host} does not resolve ({error})") from None
    found = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if address not in found:
            found.append(address)
    return found


def parse_url(url, service_domain=None):
    """Split a URL, applying the rules that need no DNS: HTTPS, a host, not the service's own domain."""
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise RefusedUrl(f"{url!r} is not a valid URL ({error})") from None
    port = _port(parts.netloc)
    if parts.scheme.lower() != "https":
        raise RefusedUrl("only https:// URLs are allowed")
    if parts.username or parts.password:
        raise RefusedUrl("credentials in the URL are not allowed; receivers verify the signature instead")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise RefusedUrl("the URL has no host")
    try:
        host = host.encode("idna").decode("ascii").lower() if not _is_ip(host) else host
    except UnicodeError:
        raise RefusedUrl(f"host {parts.hostname!r} is not a valid host name") from None
    domain = (service_domain or "").lower().rstrip(".")
    if domain and (host == domain or host.endswith("." + domain)):
        raise RefusedUrl(f"host {host} is the service's own domain {domain} or one of its subdomains")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return host, port, path


def _port(netloc):
    """The port of a URL's authority, 443 when none is written; refuses what is not 1..65535.

    Read here rather than through SplitResult.port, which gives 0 for `:0` (that `or 443`
    then turned into 443) and a bare "out of range" for the rest.
    """
    hostinfo = netloc.rpartition("@")[2]
    _, bracket, after = hostinfo.partition("]")  # an IPv6 literal holds colons of its own
    _, colon, text = (after if bracket else hostinfo).partition(":")
    if not colon or not text:
        return 443  # RFC 3986: an empty port is the scheme's default
    if not (text.isascii() and text.isdigit()):
        raise RefusedUrl(f"port {text!r} is not a number; a port is 1 to 65535 (leave it out for 443)")
    digits = text.lstrip("0")
    # Length first: int() of thousands of digits is refused (or slow) before any range check.
    if not digits or len(digits) > 5 or int(digits) > 65535:
        raise RefusedUrl(f"port {text} is out of range; a port is 1 to 65535 (leave it out for 443)")
    return int(digits)


def _article(word):
    """'an' before a vowel sound, else 'a' (the class names: an unspecified, a loopback address)."""
    return "an" if word and word[0] in "aeiou" else "a"


def names_an_address(url):
    """True when the URL's host is an IP literal (checking it needs no DNS lookup)."""
    try:
        host = (urlsplit(url).hostname or "")
    except ValueError:
        return False
    return _is_ip(host)


def _is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def check_url(url, service_domain=None, allowed=(), resolver=None):
    """A Target to connect to, or RefusedUrl naming the address, its class and the setting that would allow it."""
    host, port, path = parse_url(url, service_domain)
    addresses = (resolver or resolve)(host, port)
    if not addresses:
        raise RefusedUrl(f"host {host} has no address")
    for address in addresses:
        if any(address in network for network in allowed):
            continue
        kind = address_class(address)
        if kind is not None:
            via = "" if _is_ip(host) else f"host {host} resolves to "
            inner = embedded_ipv4(address)
            shown = f"{address} (IPv4 {inner})" if inner is not None else str(address)
            raise RefusedUrl(f"{via}{shown}, {_article(kind)} {kind} address: webhooks go only to public addresses "
                             f"(test and demo receivers can be allowed with {ALLOW_SETTING})")
    return Target(host=host, port=port, path=path, address=str(addresses[0]))
