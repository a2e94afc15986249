"""A secret string (an API key) that never prints and is never serialised; redaction of the
credentials that hide in URLs and error texts.

Invariants: `str`, `repr` and f-strings show a mask, never the value; pickling refuses, and
`json.dumps` fails on it (it is not a str); the only way to the value is `reveal()`, called where
the value is sent (an Authorization header) and nowhere else. Comparison is constant-time.
Redaction is by allow-list, failing closed: `redact_url` keeps scheme, host, port, path and user
name, and masks the password (or a user info without one), the fragment and every query value
whose name is not in SAFE_PARAMS; `redact_text` does that to every URL in a text and masks bearer
tokens, `sk-…` keys and every secret-looking `name=value` / `name: value` outside URLs;
`without_credentials` drops user info, fragment and secret-looking parameters (what is written to
disk, e.g. a store's record of its vector store). Every URL or
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
from collections.abc import Callable
from typing import Any, NoReturn
from urllib.parse import unquote_plus, urlsplit, urlunsplit

MASK = "****"
#: Query parameters whose values are shown: harmless names only (an API version, a model, paging,
#: an output format, a Postgres TLS mode). Every other value, user info and the fragment are masked.
SAFE_PARAMS = frozenset({"api-version", "api_version", "model", "format", "page", "limit", "sslmode"})
#: A name that looks like it carries a secret (matched anywhere in the name, case-insensitively):
#: what `without_credentials` drops and what `redact_text` masks in `name=value` / `name: value`.
_SECRET_WORDS = (
    r"token|secret|passw|pwd|passphrase|key|auth|credential|signature|sig|session|jwt|"
    r"assertion|cookie|private|bearer|otp"
)
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)
_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'"<>`]+""")
_NAME = r"[A-Za-z0-9_.\-]*"
_TOKENS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/=]+"), r"\1 " + MASK),
    # a secret-looking name (not an exception's name), `=` or `:`, a value (quoted or not) that is
    # not a placeholder (`KEY=VALUE`, `token: YOUR_TOKEN`)
    (re.compile(rf"(?i)(?<![A-Za-z0-9_.\-])({_NAME}(?:{_SECRET_WORDS}){_NAME})(?<!error)(?<!exception)(?<!warning)"
                r"([\"']?\s*[:=]\s*)(?![\"']?\s*(?:bearer|basic)\b)(?!\*{4}(?![^\s,;&\"'}\]>)]))(?!(?-i:VALUE|YOUR_[A-Z_]+)(?![\w\-.=/+]))(\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]>)]+)"),
     lambda m: m.group(1) + m.group(2) + _masked_value(m.group(3))),
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
    """`url` keeping its scheme, host, port, path and user name; the password (or a user info
    without one, which may be a token), every query value whose name is not in SAFE_PARAMS, a
    parameter without a value and the fragment are masked.

    >>> redact_url("postgresql://app:hunter2@db.example:5432/rag?sslmode=require&password=x")
    'postgresql://app:****@db.example:5432/rag?sslmode=require&password=****'
    >>> redact_url("https://TOKEN@llm.example/v1?api-version=2024-06&x=1&bare#access_token=t")
    'https://****@llm.example/v1?api-version=2024-06&x=****&****#****'
    >>> redact_url("store.db")
    'store.db'
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port is a ValueError: the URL is not shown
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            name, colon, _password = user.partition(":")
            netloc = f"{name}:{MASK}@{host}" if colon and name else f"{MASK}@{host}"
        query = "&".join(_masked_param(p) for p in re.split(r"[&;]", parts.query)) if parts.query else ""
        fragment = MASK if parts.fragment else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:  # not parseable as a URL: mask everything after the scheme
        return url.split("://", 1)[0] + "://" + MASK


def without_credentials(url: str) -> str:
    """`url` with its user info, its fragment and its credential-like query parameters (any name
    that looks secret) removed: what may be written down (a store's record of where its vectors
    are); a path is returned unchanged.

    >>> without_credentials("postgresql://app:hunter2@db.example:5432/rag?sslmode=require&password=x")
    'postgresql://db.example:5432/rag?sslmode=require'
    >>> without_credentials("https://TOKEN@qdrant.example:6333"), without_credentials("data/qdrant")
    ('https://qdrant.example:6333', 'data/qdrant')
    >>> without_credentials("https://h/x?a=1;password=hunter2&ghp_abc123")
    'https://h/x?a=1'
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        # split as redact_url splits; a bare name (no value) may itself be a token: dropped
        kept = [p for p in re.split(r"[&;]", parts.query) if "=" in p and not _secret_name(unquote_plus(p.split("=")[0]))]
        query = "&".join(kept)  # the other parameters exactly as written
        return urlunsplit((parts.scheme, host, parts.path, query, ""))
    except ValueError:  # not parseable as a URL: keep nothing after the scheme
        return url.split("://", 1)[0] + "://"


def redact_text(text: str) -> str:
    """`text` with every URL redacted (`redact_url`) and, outside URLs, bearer tokens, `sk-…` keys
    and the value of every secret-looking `name=value` / `name: value` pair masked.

    >>> redact_text("HTTP 401 for http://u:pw@llm/v1: echo 'Authorization: Bearer sk-abcdef123'")
    "HTTP 401 for http://u:****@llm/v1: echo 'Authorization: Bearer ****'"
    >>> redact_text('Ocp-Apim-Subscription-Key: abc hf_token=xyz {"jwt": "a b"} page=2 KEY=VALUE')
    'Ocp-Apim-Subscription-Key: **** hf_token=**** {"jwt": "****"} page=2 KEY=VALUE'
    """
    out, last = [], 0
    for match in _URL.finditer(text):
        out.append(_redact_words(text[last : match.start()]))
        out.append(redact_url(match.group()))
        last = match.end()
    out.append(_redact_words(text[last:]))
    return "".join(out)


def _redact_words(text: str) -> str:
    """Text without URLs, its tokens and secret-looking values masked."""
    for pattern, replacement in _TOKENS:
        text = pattern.sub(replacement, text)
    return text


def _masked_value(value: str) -> str:
    """A value's mask, keeping the quotes it was written in."""
    return f"{value[0]}{MASK}{value[0]}" if value[:1] in {'"', "'"} else MASK


def _masked_param(param: str) -> str:
    """One `name=value` of a query, its value masked unless the name is in SAFE_PARAMS; a bare
    name (no `=`, possibly a token itself) is masked whole."""
    name, equals, _value = param.partition("=")
    if unquote_plus(name).strip().lower() in SAFE_PARAMS:
        return param
    return f"{name}={MASK}" if equals else (MASK if param else param)


def _secret_name(name: str) -> bool:
    """A parameter or field name that looks like it carries a secret."""
    return bool(_SECRET_NAME.search(name))
