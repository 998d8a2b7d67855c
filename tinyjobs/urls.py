"""Store URLs: which store a URL names, and how to print it without its password."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .errors import ConfigError

SCHEMES = {
    "sqlite": "sqlite",
    "memory": "memory",
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
}
_SECRET_PARAMS = {"password", "pass", "pwd", "secret", "token", "sslpassword"}
_NETLOC = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<netloc>[^/?#]*)(?P<rest>.*)$", re.S)


def mask(url: str) -> str:
    """`url` with any password replaced by ***, in the userinfo and in the query string.

    Works on malformed URLs too (it never raises), since it is used in error messages."""
    text = str(url)
    match = _NETLOC.match(text)
    if match and "@" in match["netloc"]:
        userinfo, _, host = match["netloc"].rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        text = f"{match['scheme']}{userinfo}@{host}{match['rest']}"
    if "?" in text:
        head, _, query = text.partition("?")
        try:
            pairs = parse_qsl(query, keep_blank_values=True)
        except ValueError:
            return head + "?***"
        pairs = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
        text = head + "?" + urlencode(pairs, safe="*/:")
    return text


def store_kind(url: str) -> str:
    """'sqlite', 'memory', 'postgres' or 'redis' for a URL; ConfigError naming the scheme otherwise."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"store URL {mask(str(url))!r} has no scheme; use sqlite:///path.db, postgresql://..., "
            "redis://... or memory://"
        )
    scheme = url.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise ConfigError(
            f"store URL {mask(url)!r}: unknown scheme {scheme!r}; use one of " + ", ".join(sorted(SCHEMES))
        )
    return SCHEMES[scheme]


def split(url: str) -> tuple[str, str, str, dict[str, str]]:
    """(scheme, netloc, path, query) of a URL, with ConfigError on a malformed one."""
    try:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query)))
    except ValueError as err:
        raise ConfigError(f"store URL {mask(url)!r} is malformed: {err}") from None
    return parts.scheme.lower(), parts.netloc, parts.path, query


def with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))
