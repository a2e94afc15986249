"""A secret string (an API key) that never prints and is never serialised; redaction of the
credentials that hide in URLs and error texts.

Invariants: `str`, `repr` and f-strings show a mask, never the value; pickling refuses, and
`json.dumps` fails on it (it is not a str); the only way to the value is `reveal()`, called where
the value is sent (an Authorization header) and nowhere else. Comparison is constant-time.
`redact_url` masks the password of a URL's user info (`postgresql://app:****@db/x`) and the
values of credential-like query parameters (`?api_key=****`); `without_credentials` drops both
(what is written to disk, e.g. a store's record of its vector store); `redact_text` does that to every
URL in a text and masks `Bearer` tokens, `Authorization:` values and `sk-…` keys. Every URL or
error text RAGSpine prints or answers (config show, the serve banner, CLI and HTTP errors,
/stats, logged upstream bodies) goes through them.

>>> key = Secret("sk-example-not-a-real-key")
>>> print(key, repr(key))
**** Secret('****')
>>> key.matches("sk-example-not-a-real-key")
True
"""

from __future__ import annotations

import hmac
import re
from typing import Any, NoReturn
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

MASK = "****"
_CREDENTIAL_PARAMS = re.compile(
    r"(?i)^(?:api[-_]?key|apikey|key|token|access[-_]?token|auth|password|passwd|pwd|secret|"
    r"client[-_]?secret|sig|signature|x-amz-signature|x-goog-signature)$"
)
_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'"<>`]+""")
_TOKENS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/=]+"), r"\1 " + MASK),
    (re.compile(r"(?i)\b(authorization|x-api-key|api[-_]?key)(\"?\s*[:=]\s*\"?)(?!\s*(?:bearer|basic)\b)[^\s,;\"'}]+"),
     r"\1\2" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9\-_]{6,}"), "sk-" + MASK),
)  # fmt: skip


class Secret:
    """Holds one secret value; see the module docstring."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("a secret must be a non-empty string")
        self._value = value

    def reveal(self) -> str:
        """The value itself: only for sending it where it belongs, never for printing."""
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison with `candidate`."""
        return hmac.compare_digest(self._value.encode("utf-8"), candidate.encode("utf-8", "replace"))

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __format__(self, spec: str) -> str:
        return format(MASK, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.matches(other._value)

    def __hash__(self) -> int:
        return hash((Secret, len(self._value)))

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is never serialised")


def redact_url(url: str) -> str:
    """`url` with the password of its user info and credential-like query values masked.

    >>> redact_url("postgresql://app:hunter2@db.example:5432/rag?sslmode=require&password=x")
    'postgresql://app:****@db.example:5432/rag?sslmode=require&password=****'
    >>> redact_url("store.db")
    'store.db'
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            name, colon, _password = user.partition(":")
            netloc = f"{name}:{MASK}@{host}" if colon else f"{MASK}@{host}" if _looks_secret(name) else netloc
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_CREDENTIAL_PARAMS.match(k) for k, _ in pairs):
                masked = [(k, MASK if _CREDENTIAL_PARAMS.match(k) else v) for k, v in pairs]
                query = urlencode(masked, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # not parseable as a URL: mask everything after the scheme
        return url.split("://", 1)[0] + "://" + MASK


def without_credentials(url: str) -> str:
    """`url` with its user info and its credential-like query parameters removed: what may be
    written down (a store's record of where its vectors are); a path is returned unchanged.

    >>> without_credentials("postgresql://app:hunter2@db.example:5432/rag?sslmode=require&password=x")
    'postgresql://db.example:5432/rag?sslmode=require'
    >>> without_credentials("https://TOKEN@qdrant.example:6333"), without_credentials("data/qdrant")
    ('https://qdrant.example:6333', 'data/qdrant')
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        kept = [p for p in parts.query.split("&") if p and not _CREDENTIAL_PARAMS.match(unquote_plus(p.split("=")[0]))]
        query = "&".join(kept)  # the other parameters exactly as written
        return urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))
    except ValueError:  # not parseable as a URL: keep nothing after the scheme
        return url.split("://", 1)[0] + "://"


def redact_text(text: str) -> str:
    """`text` with every URL redacted (`redact_url`) and bearer tokens, Authorization / API-key
    values and `sk-…` keys masked.

    >>> redact_text("HTTP 401 for http://u:pw@llm/v1: echo 'Authorization: Bearer sk-abcdef123'")
    "HTTP 401 for http://u:****@llm/v1: echo 'Authorization: Bearer ****'"
    """
    text = _URL.sub(lambda m: redact_url(m.group()), text)
    for pattern, replacement in _TOKENS:
        text = pattern.sub(replacement, text)
    return text


def _looks_secret(user: str) -> bool:
    """A user-info part without a colon that is really a token (`https://TOKEN@host`)."""
    return len(user) >= 20
