"""API keys with a role: read < write < admin (as Elasticsearch and Qdrant keys have).

Invariants: a key's role is fixed where RAGSPINE_API_KEYS is read: `read:KEY`, `write:KEY` or
`admin:KEY`; a key with no role prefix is a `write` key (it keeps what a key could do before
roles: search and post documents, but no longer sees /stats internals, which need `admin`).
A prefix is recognised only when it is exactly one of the role names followed by `:`; a prefix
that is a role name in another case or with spaces (`READ:KEY`, `read: KEY`) is refused (it would
otherwise make a write key, or a key the client cannot send); any other text before a colon is
part of the key. Roles are ordered: a role admits everything a lower one
does. The key itself is a `Secret` (never printed, compared in constant time).

>>> key = ApiKey.parse("read:Zx4-pQ9_mW2rT7vL")
>>> key.role, str(key), key.matches("Zx4-pQ9_mW2rT7vL"), key.allows("write")
('read', '****', True, False)
>>> ApiKey.parse("Zx4-pQ9_mW2rT7vL").role
'write'
"""

from __future__ import annotations

from typing import Literal

from ragspine.secret import Secret

Role = Literal["read", "write", "admin"]
#: The roles, least first: a role admits what every role before it admits.
ROLES: tuple[Role, ...] = ("read", "write", "admin")
#: The role of a key written without a prefix (what every key could do before roles, less admin).
DEFAULT_ROLE: Role = "write"
#: What a caller is when the service has no keys at all (it then binds a loopback address only):
#: the operator on the same machine.
NO_KEYS_ROLE: Role = "admin"


class ApiKey(Secret):
    """One API key and its role; see the module docstring."""

    __slots__ = ("role",)

    def __init__(self, value: str, role: Role = DEFAULT_ROLE) -> None:
        if role not in ROLES:
            raise ValueError(f"unknown API key role {role!r}; accepted: {', '.join(ROLES)}")
        super().__init__(value)
        self.role: Role = role

    @classmethod
    def parse(cls, entry: str) -> ApiKey:
        """`role:KEY` or a bare `KEY` (role `write`)."""
        prefix, sep, rest = entry.partition(":")
        if sep and prefix in ROLES and rest == rest.strip():
            return cls(rest, prefix)
        if sep and prefix.strip().casefold() in ROLES:  # `READ:KEY`, `read :KEY`, `read: KEY`: never a write key
            raise ValueError("a role prefix is written in lowercase with no space: read:KEY, write:KEY or admin:KEY")
        return cls(entry)

    def allows(self, needed: Role) -> bool:
        """Whether this key's role is `needed` or above it."""
        return role_allows(self.role, needed)

    def __repr__(self) -> str:
        return f"ApiKey('****', role={self.role!r})"


def role_allows(role: Role, needed: Role) -> bool:
    """Whether `role` is `needed` or above it (`ROLES` order)."""
    return ROLES.index(role) >= ROLES.index(needed)


def role_of(key: Secret) -> Role:
    """The role of a configured key: an `ApiKey`'s, else (a bare `Secret`, as Python callers may
    build settings) the default role."""
    return key.role if isinstance(key, ApiKey) else DEFAULT_ROLE


def describe_keys(keys: tuple[Secret, ...]) -> str:
    """How many keys of each role, for the `serve` banner (never a key).

    >>> describe_keys((ApiKey("Zx4-pQ9_mW2rT7vL", "read"), ApiKey("Hm3_kT8-zB5qWc1y"))), describe_keys(())
    ('2 API key(s): 1 read, 1 write', 'no API keys (loopback only)')
    """
    if not keys:
        return "no API keys (loopback only)"
    roles = [role_of(key) for key in keys]
    return f"{len(keys)} API key(s): " + ", ".join(f"{roles.count(r)} {r}" for r in ROLES if r in roles)
