"""Values that look sensitive but are documentation, placeholders or protocol constants: they must survive redaction.

Traces are full of them (README snippets, test fixtures, ``curl`` examples). Replacing them teaches a model nothing
and hides what a command did, so each family is recognised by what it *is*, never by nearby words: a real key next
to the word "example" is still a real key.

* addresses: the RFC 5737 / RFC 3849 / RFC 9637 documentation ranges, loopback, unspecified, multicast and reserved
  (netmasks, broadcast) addresses, the cloud metadata endpoint. Private RFC 1918 / ULA / CGNAT addresses are *not*
  decoys: they name real internal machines.
* names: the RFC 2606 / RFC 6761 reserved domains (``example.com``/``.net``/``.org`` and ``*.example``,
  ``*.test``, ``*.invalid``, ``*.localhost``) and e-mail addresses at them. ``.local`` (mDNS) names real hosts and
  is not one.
* secrets: vendor-documented example keys (AWS's ``...EXAMPLE`` pair, jwt.io's token, Stripe's doc keys) and
  values that carry no entropy: fillers (``xxxx``, ``****``, ``sk-...``), counting runs (``sk-1234567890abcdef``),
  wrapped names (``<token>``, ``${TOKEN}``, ``{{ key }}``) and phrases (``YOUR_API_KEY``, ``my-secret-token``).
* numbers: phone ranges reserved for fiction (NANP 555-0100..0199, Ofcom drama numbers) and card-network test
  card numbers.
"""

from __future__ import annotations

import functools
import ipaddress
import re

# ---- addresses ---------------------------------------------------------------------------------------------------
_DOC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",  # RFC 5737 TEST-NET-1/2/3
        "2001:db8::/32",
        "3fff::/20",  # RFC 3849, RFC 9637
        "0.0.0.0/8",  # "this network"
    )
)
#: Well-known constants that are the same on every machine (cloud instance metadata, IPv4 and IPv6).
_CONSTANT_IPS = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})


def _parse_ip(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    v = value.strip().strip("[]").split("%")[0]
    try:
        return ipaddress.ip_network(v, strict=False)
    except ValueError:
        return None


#: Whole special-purpose blocks: written as ranges they name an address space (firewall rules, docs), not a network.
_SPECIAL_BLOCKS = frozenset(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/0",
        "::/0",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "127.0.0.0/8",
        "224.0.0.0/4",
        "fc00::/7",
        "fd00::/8",
        "fe80::/10",
        "ff00::/8",
    )
)


def is_decoy_ip(value: str) -> bool:
    """Documentation, loopback, unspecified, multicast or reserved (e.g. a netmask): an address that names no host.

    A CIDR range counts by its network address (``192.0.2.0/24`` is a decoy, ``10.12.0.0/16`` is not); a whole
    special-purpose block (``10.0.0.0/8``, ``fc00::/7``) is one too."""
    net = _parse_ip(value)
    if net is None:
        return False
    if "/" in value and net in _SPECIAL_BLOCKS:
        return True
    ip = net.network_address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _CONSTANT_IPS or any(ip in n for n in _DOC_NETWORKS if n.version == ip.version):
        return True
    if ip.is_loopback or ip.is_unspecified or ip.is_multicast:
        return True
    if ip.version == 4 and ip.is_reserved:  # 240/4: netmasks such as 255.255.255.0, the broadcast address
        return True
    return ip.version == 6 and ip.is_link_local  # fe80::/10 is derived per link, never routed


#: RFC 2606 second-level names and RFC 2606 / 6761 reserved top-level names.
RESERVED_DOMAINS = frozenset({"example.com", "example.net", "example.org"})
RESERVED_TLDS = frozenset({"example", "test", "invalid", "localhost"})


def is_reserved_host(host: str) -> bool:
    """A host name or address that can only be an example: ``api.example.com``, ``db.test``, ``localhost``,
    ``[2001:db8::1]``, ``127.0.0.1``."""
    h = host.strip().strip("[]").lower().rstrip(".")
    if not h:
        return False
    if _parse_ip(h) is not None:
        return is_decoy_ip(h)
    if h in RESERVED_DOMAINS or any(h.endswith("." + d) for d in RESERVED_DOMAINS):
        return True
    return h.rpartition(".")[2] in RESERVED_TLDS


def is_decoy_email(value: str) -> bool:
    """An address at a reserved domain (``user@example.com``, ``ci@build.test``)."""
    _, at, domain = value.rpartition("@")
    return bool(at) and is_reserved_host(domain)


# ---- secrets -----------------------------------------------------------------------------------------------------
#: Keys that vendors publish in their documentation (and that therefore appear in countless READMEs and tests).
DOCUMENTED_EXAMPLE_SECRETS = frozenset(
    {
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # AWS
        "AKIAI44QH8DHBEXAMPLE",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",  # AWS, the second pair
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "pk_test_TYooMQauvdEDq54NiTphI7jx",  # Stripe API reference
        # jwt.io's default token (HS256, secret "your-256-bit-secret")
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    }
)

_ENV_REF = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")
# ``<token>``, ``[REDACTED]``, ``{{ secrets.NPM_TOKEN }}``, ``%API_KEY%``: the inside is what decides
_WRAPPED = re.compile(r"^(?:<([^<>]*)>|\[([^\[\]]*)\]|\{\{?([^{}]*)\}?\}|%([A-Za-z_]\w*)%)$")
_WORD = re.compile(r"^(?:[a-z]+|[A-Z]+|[A-Z][a-z]+)$")
#: What a template slot is named after: ``<token>``, ``{{ secrets.NPM_TOKEN }}``, ``%API_KEY%``, ``[REDACTED]``.
_SLOT_WORDS = frozenset(
    {
        "token",
        "tokens",
        "key",
        "keys",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "pwd",
        "credential",
        "credentials",
        "apikey",
        "auth",
        "value",
        "hidden",
    }
)
# vendor prefixes (``sk-proj-``, ``ghp_``, ``xoxb-``, ``AKIA``...): the body after them is what carries entropy
_VENDOR_PREFIX = re.compile(r"^(?:AKIA|ASIA|AIza|ya29\.|SG\.|GOCSPX-|(?:[a-z][a-z0-9]{1,9}[-_]){1,3})")
_SEPARATORS = re.compile(r"[-_.:/+=\s]+")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
#: Words that only a placeholder is made of (``YOUR_API_KEY``, ``token-goes-here``, ``replace-me``).
_STRONG_MARKERS = frozenset(
    {
        "your",
        "example",
        "examples",
        "sample",
        "dummy",
        "fake",
        "placeholder",
        "replace",
        "replaceme",
        "changeme",
        "insert",
        "here",
        "redacted",
        "todo",
        "fixme",
        "tbd",
        "xxx",
        "xxxx",
        "enter",
        "paste",
        "goes",
    }
)
#: ...and words that make one only together with secret vocabulary (``my-secret-token`` yes, ``MyDogRex1`` no).
_WEAK_MARKERS = frozenset({"my", "some", "the", "an", "test", "demo", "foo", "bar", "baz", "not", "real"})
_VOCABULARY = frozenset(
    {
        "secret",
        "secrets",
        "token",
        "tokens",
        "key",
        "keys",
        "api",
        "apikey",
        "access",
        "password",
        "passwd",
        "pass",
        "pwd",
        "auth",
        "client",
        "id",
        "app",
        "bot",
        "bearer",
        "private",
        "public",
        "value",
        "string",
        "webhook",
        "signing",
        "session",
        "credential",
        "credentials",
        "aws",
        "github",
        "gitlab",
        "openai",
        "anthropic",
        "slack",
        "stripe",
        "personal",
        "account",
        "service",
        "user",
        "username",
        "live",
        "sk",
        "pk",
        "ghp",
        "hf",
        "xoxb",
        "of",
        "this",
        "will",
        "work",
        "to",
        "with",
        "and",
        "for",
        "is",
        "it",
    }
)
#: A value that only names what it is: ``password: password``.
_SELF_NAMES = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "changeme",
        "pass",
        "pwd",
        "key",
        "accesskey",
        "access_key",
        "credentials",
    }
)
_PEM_BODY = re.compile(r"-----BEGIN [A-Z0-9 ]*-----(.*?)(?:-----END|\Z)", re.DOTALL)


def _filler(chars: str) -> bool:
    """Mostly runs of one repeated character (``xxxxxxxx``, ``XXXX-XXXX``, ``0000``, ``****``) or very few distinct
    characters: no entropy to protect. Thresholds keep short random hex or digit strings out."""
    distinct = len(set(chars))
    if (len(chars) >= 8 and distinct <= 2) or (len(chars) >= 16 and distinct <= 3):
        return True
    in_runs = sum(len(m.group()) for m in re.finditer(r"(.)\1{3,}", chars))
    return len(chars) >= 4 and in_runs * 4 >= len(chars) * 3


def _counting(chars: str) -> bool:
    """Mostly counting runs (``1234567890``, ``abcdef``, ``abc123def456``): typed by a person, not generated."""
    if len(chars) < 6:
        return False
    steps = sum(ord(b) - ord(a) == 1 for a, b in zip(chars, chars[1:], strict=False))
    return steps >= 0.6 * (len(chars) - 1)


def _phrase(value: str) -> bool:
    """Made of words only, and those words say "placeholder"."""
    words = [w.lower() for w in _WORDS.findall(value)]
    if not words or not all(len(w) >= 2 if w.isalpha() else len(w) <= 2 for w in words):
        return False  # single letters and long numbers: a random token cut into pieces, not words
    if "".join(_WORDS.findall(value)) != _SEPARATORS.sub("", value):
        return False  # other characters in it (``!``, ``@``): a typed password, not a phrase
    known = sum(w in _STRONG_MARKERS or w in _WEAK_MARKERS or w in _VOCABULARY for w in words)
    if any(w in _STRONG_MARKERS for w in words):
        return known * 2 >= len(words)  # a random token may contain "here" by chance, never mostly such words
    return any(w in _WEAK_MARKERS for w in words) and known + sum(w.isdigit() for w in words) == len(words)


def _slot_name(inner: str) -> bool:
    """Words (not a random mix of cases) naming what goes there: ``token``, ``secrets.NPM_TOKEN``, ``your-key``."""
    parts = [p for p in _SEPARATORS.split(inner) if p]
    if not parts or not all(_WORD.match(p) for p in parts):
        return not parts
    return any(p.lower() in _SLOT_WORDS or p.lower() in _STRONG_MARKERS for p in parts)


@functools.lru_cache(maxsize=4096)
def is_placeholder_secret(value: str) -> bool:
    """A secret-shaped value that holds no secret: a documented example, a filler, a counting run, a wrapped name or
    a placeholder phrase. Judged on the value alone (never on surrounding words), so real keys are never spared."""
    v = value.strip().strip("'\"`")
    pem = _PEM_BODY.match(v)
    if pem:
        v = re.sub(r"\s+", "", pem.group(1))
        if not v:
            return True
    if not v or v in DOCUMENTED_EXAMPLE_SECRETS:
        return True
    if (
        "EXAMPLE" in v
    ):  # AWS's documentation convention (...EXAMPLE, ...EXAMPLEKEY); a random key never spells it
        return True
    if _ENV_REF.match(v) or v.lower() in _SELF_NAMES:
        return True
    wrapped = _WRAPPED.match(v)
    if wrapped:  # a name in brackets is a template slot; a random token in brackets is still a token
        inner = next(g for g in wrapped.groups() if g is not None).strip()
        return _slot_name(inner) or is_placeholder_secret(inner)
    body = _VENDOR_PREFIX.sub("", v, count=1)
    if len(_SEPARATORS.sub("", body)) < 4:
        body = v
    chars = _SEPARATORS.sub("", body)
    if not chars:
        return True  # only dots and dashes: ``sk-...``
    return _filler(chars) or _counting(chars) or _phrase(v) or _phrase(body)


# ---- numbers -----------------------------------------------------------------------------------------------------
# Ofcom's numbers for drama (UK, national format): 01x1/011x 496 0xxx, 0191 498 0xxx, 020 7946 0xxx, 028 9649 6xxx,
# 029 2018 0xxx, 01632 960xxx, 07700 900xxx, 08081 570xxx, 0909 8790xxx, 03069 990xxx.
_UK_FICTION = re.compile(
    r"^0(?:1(?:1[3-8]|[2-6]1)4960|1914980|2079460|2896496|2920180|1632960|7700900|8081570|9098790|3069990)\d{3}$"
)


def is_fictional_phone(value: str) -> bool:
    """A number reserved for fiction and examples: NANP 555-0100..555-0199, UK Ofcom drama ranges."""
    digits = re.sub(r"\D", "", value)
    if len(digits) == 11 and digits.startswith("1"):
        digits = digits[1:]
    if len(digits) == 10 and digits[3:7] == "5550" and digits[7] == "1":
        return True
    if len(digits) == 7 and digits.startswith("5550") and digits[4] == "1":
        return True
    uk = re.sub(r"\D", "", value)
    if uk.startswith("44"):
        uk = "0" + uk[2:]
    return bool(_UK_FICTION.match(uk))


#: Test card numbers the card networks and payment processors publish (they never charge).
TEST_CARD_NUMBERS = frozenset(
    {
        "4111111111111111",
        "4242424242424242",
        "4012888888881881",
        "4000056655665556",
        "4000000000000002",
        "4000000000000077",
        "4000000000009995",
        "4000002500003155",
        "5555555555554444",
        "5105105105105100",
        "5200828282828210",
        "2223003122003222",
        "378282246310005",
        "371449635398431",
        "378734493671000",
        "6011111111111117",
        "6011000990139424",
        "3056930009020004",
        "36227206271667",
        "3566002020360505",
        "6200000000000005",
        "30569309025904",
        "38520000023237",
        "5019717010103742",
        "6331101999990016",
    }
)


def is_test_card(value: str) -> bool:
    """A published test card number, or one whose digits after the network's first are one or two repeated
    (``4111 1111 1111 1111``, ``4242 4242 4242 4242``): no real card has that shape."""
    digits = re.sub(r"\D", "", value)
    return digits in TEST_CARD_NUMBERS or (len(digits) >= 13 and len(set(digits[1:])) <= 2)


__all__ = [
    "DOCUMENTED_EXAMPLE_SECRETS",
    "RESERVED_DOMAINS",
    "RESERVED_TLDS",
    "TEST_CARD_NUMBERS",
    "is_decoy_email",
    "is_decoy_ip",
    "is_fictional_phone",
    "is_placeholder_secret",
    "is_reserved_host",
    "is_test_card",
]
