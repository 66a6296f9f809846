"""The SSRF guard: refused on save and before every delivery, for every class of non-public address."""
import ipaddress

import pytest

from delivery import ssrf
from delivery.sender import send_delivery
from tests.support.webhooks import claimed_delivery, delivery_settings, resolver

REFUSED = [
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"),
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("100.64.0.1", "shared"), ("100.127.255.254", "shared"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"), ("192.88.99.1", "reserved"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("192.0.2.10", "private"), ("198.51.100.7", "private"), ("198.18.0.1", "private"), ("2001:db8::1", "private"),
    ("::ffff:10.0.0.1", "private"), ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::a00:1", "private"), ("64:ff9b::7f00:1", "loopback"), ("64:ff9b::a9fe:a9fe", "link-local"),
    ("64:ff9b:1::808:808", "reserved"), ("2002:a00:1::1", "private"), ("::127.0.0.1", "loopback"),
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address, kind", REFUSED)
def test_non_public_classes(address, kind):
    assert ssrf.address_class(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses(address):
    assert ssrf.address_class(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address, kind", REFUSED)
def test_ip_literal_urls_refused(address, kind):
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(ssrf.RefusedUrl) as refused:
        ssrf.check_url(f"https://{host}/hook", "shiptrack.example", resolver=_no_dns)
    assert str(refused.value).startswith(str(ipaddress.ip_address(address)))
    assert f"{'an' if kind == 'unspecified' else 'a'} {kind} address" in str(refused.value)
    assert "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS" in str(refused.value)


def _no_dns(host, port):
    return ssrf.resolve(host, port) if _literal(host) else pytest.fail(f"unexpected lookup of {host}")


def _literal(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _fake_dns(answers):
    return lambda host, port: [ipaddress.ip_address(a) for a in answers[host]]


def test_host_name_resolving_to_a_private_address():
    with pytest.raises(ssrf.RefusedUrl) as refused:
        ssrf.check_url("https://hooks.customer.example/in",
                       resolver=_fake_dns({"hooks.customer.example": ["10.0.0.7"]}))
    assert str(refused.value).startswith("host hooks.customer.example resolves to 10.0.0.7, a private address")


def test_real_lookup_of_localhost_is_refused():
    with pytest.raises(ssrf.RefusedUrl, match="loopback address"):
        ssrf.check_url("https://localhost:8443/hook")


def test_mixed_answer_is_refused():
    dns = _fake_dns({"rebind.example": ["93.184.216.34", "127.0.0.1"]})
    with pytest.raises(ssrf.RefusedUrl, match="127.0.0.1, a loopback address"):
        ssrf.check_url("https://rebind.example/", resolver=dns)


def test_public_host_gives_the_address_to_connect_to():
    target = ssrf.check_url("https://Hooks.Customer.Example:8443/in?x=1",
                            resolver=_fake_dns({"hooks.customer.example": ["93.184.216.34"]}))
    assert target == ssrf.Target(host="hooks.customer.example", port=8443, path="/in?x=1", address="93.184.216.34")


@pytest.mark.parametrize("url, message", [
    ("http://hooks.customer.example/", "only https:// URLs are allowed"),
    ("ftp://hooks.customer.example/", "only https:// URLs are allowed"),
    ("https:///nohost", "the URL has no host"),
    ("https://user:pw@hooks.customer.example/", "credentials in the URL are not allowed"),
    ("https://shiptrack.example/hook", "service's own domain"),
    ("https://api.shiptrack.example/hook", "service's own domain"),
    ("https://API.ShipTrack.Example./hook", "service's own domain"),
    ("https://hooks.customer.example:99999/", "port 99999 is out of range"),
    ("https://[::1/", "not a valid URL"),
])
def test_url_rules(url, message):
    with pytest.raises(ssrf.RefusedUrl, match=message.replace("'", ".").replace("/", ".")):
        ssrf.check_url(url, "shiptrack.example", resolver=_fake_dns({"hooks.customer.example": ["93.184.216.34"]}))


ALLOWED_HINT = ("webhooks go only to public addresses (test and demo receivers can be allowed with "
                "SHIPTRACK_WEBHOOK_ALLOWED_NETWORKS)")


@pytest.mark.parametrize("url, message", [
    ("https://0.0.0.0/", f"0.0.0.0, an unspecified address: {ALLOWED_HINT}"),
    ("https://[::]/", f"::, an unspecified address: {ALLOWED_HINT}"),
    ("https://zero.example/", f"host zero.example resolves to 0.0.0.0, an unspecified address: {ALLOWED_HINT}"),
    ("https://[::ffff:0.0.0.0]/", f"::ffff:0:0 (IPv4 0.0.0.0), an unspecified address: {ALLOWED_HINT}"),
    ("https://127.0.0.1/", f"127.0.0.1, a loopback address: {ALLOWED_HINT}"),
    ("https://169.254.169.254/", f"169.254.169.254, a link-local address: {ALLOWED_HINT}"),
    ("https://100.64.0.1/", f"100.64.0.1, a shared address: {ALLOWED_HINT}"),
    ("https://240.0.0.1/", f"240.0.0.1, a reserved address: {ALLOWED_HINT}"),
    ("https://10.0.0.1/", f"10.0.0.1, a private address: {ALLOWED_HINT}"),
])
def test_refusal_names_the_class_with_its_article(url, message):
    with pytest.raises(ssrf.RefusedUrl) as refused:
        ssrf.check_url(url, resolver=lambda host, port: [ipaddress.ip_address(
            "0.0.0.0" if host == "zero.example" else host)])
    assert str(refused.value) == message


@pytest.mark.parametrize("url, port", [
    ("https://hooks.customer.example/in", 443),
    ("https://hooks.customer.example:/in", 443),       # an empty port is the default (RFC 3986)
    ("https://hooks.customer.example:1/in", 1),
    ("https://hooks.customer.example:8443/in", 8443),
    ("https://hooks.customer.example:08443/in", 8443),
    ("https://hooks.customer.example:65535/in", 65535),
    ("https://[2606:4700:4700::1111]:8443/in", 8443),
    ("https://[2606:4700:4700::1111]/in", 443),
])
def test_ports_in_range(url, port):
    dns = lambda host, _port: [ipaddress.ip_address("93.184.216.34" if host == "hooks.customer.example" else host)]
    assert ssrf.check_url(url, resolver=dns).port == port


OUT_OF_RANGE = "port {} is out of range; a port is 1 to 65535 (leave it out for 443)"
NOT_A_NUMBER = "port {!r} is not a number; a port is 1 to 65535 (leave it out for 443)"


@pytest.mark.parametrize("port, message", [
    ("0", OUT_OF_RANGE.format("0")),
    ("00", OUT_OF_RANGE.format("00")),
    ("65536", OUT_OF_RANGE.format("65536")),
    ("99999", OUT_OF_RANGE.format("99999")),
    ("100000000000000000443", OUT_OF_RANGE.format("100000000000000000443")),
    ("9" * 5000, OUT_OF_RANGE.format("9" * 5000)),
    ("-1", NOT_A_NUMBER.format("-1")),
    ("+443", NOT_A_NUMBER.format("+443")),
    (" 443", NOT_A_NUMBER.format(" 443")),
    ("0x1bb", NOT_A_NUMBER.format("0x1bb")),
    ("4_43", NOT_A_NUMBER.format("4_43")),
    ("\u0664\u0664\u0663", NOT_A_NUMBER.format("\u0664\u0664\u0663")),
    ("https", NOT_A_NUMBER.format("https")),
    ("443:444", NOT_A_NUMBER.format("443:444")),
])
@pytest.mark.parametrize("host", ["hooks.customer.example", "[2606:4700:4700::1111]", "93.184.216.34"])
def test_ports_out_of_range_or_not_numbers_are_refused(host, port, message):
    with pytest.raises(ssrf.RefusedUrl) as refused:
        ssrf.check_url(f"https://{host}:{port}/in", resolver=lambda *_: pytest.fail("no lookup"))
    assert str(refused.value) == message


def test_not_my_domain_lookalike_is_fine():
    dns = _fake_dns({"notshiptrack.example": ["93.184.216.34"]})
    assert ssrf.check_url("https://notshiptrack.example/", "shiptrack.example", resolver=dns).address == "93.184.216.34"


def test_allowed_networks_admit_named_local_networks_only():
    allowed = ssrf.allowed_networks("127.0.0.1/32, 10.9.0.0/16")
    assert ssrf.check_url("https://127.0.0.1:9/", allowed=allowed).address == "127.0.0.1"
    assert ssrf.check_url("https://10.9.3.4/", allowed=allowed).address == "10.9.3.4"
    with pytest.raises(ssrf.RefusedUrl):
        ssrf.check_url("https://10.8.0.1/", allowed=allowed)


@pytest.mark.parametrize("catch_all", ["0.0.0.0/0", "::/0", "0.0.0.0/1", "10.0.0.0/7", "::/8"])
def test_catch_all_networks_are_refused_outright(catch_all):
    with pytest.raises(ValueError, match="catch-all"):
        ssrf.allowed_networks([catch_all])


def test_unresolvable_host_is_refused():
    with pytest.raises(ssrf.RefusedUrl, match="does not resolve"):
        ssrf.check_url("https://no-such-host.invalid/")


def test_checked_again_before_every_delivery(receiver, ca_bundle):
    """A host that was public when saved but now resolves to a private address is not contacted."""
    settings = delivery_settings(WEBHOOK_CA_BUNDLE=ca_bundle)
    delivery = claimed_delivery(receiver.url("/ok"), "whsec_AAAA", 1, "{}")
    outcome = send_delivery(settings.make_sender(resolver), delivery).outcome
    assert not outcome.succeeded and outcome.address is None
    assert outcome.error.startswith("refused: host receiver.test resolves to 127.0.0.1, a loopback address")
    assert receiver.requests == []


@pytest.mark.parametrize("port, message", [("0", OUT_OF_RANGE.format("0")),
                                           ("65536", OUT_OF_RANGE.format("65536")),
                                           ("x", NOT_A_NUMBER.format("x"))])
def test_port_checked_again_before_every_delivery(receiver, ca_bundle, port, message):
    """A stored URL with a port the checks refuse (one written straight to the table) is not contacted."""
    settings = delivery_settings(WEBHOOK_ALLOWED_NETWORKS=["127.0.0.1/32"], WEBHOOK_CA_BUNDLE=ca_bundle)
    delivery = claimed_delivery(f"https://127.0.0.1:{port}/ok", "whsec_AAAA", 1, "{}")
    outcome = send_delivery(settings.make_sender(resolver), delivery).outcome
    assert (outcome.succeeded, outcome.status_code, outcome.address) == (False, None, None)
    assert outcome.error == f"refused: {message}"
    assert receiver.requests == []
