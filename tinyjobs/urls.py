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
# A URL inside a message: a scheme, then everything up to a space or a quote.
_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]*")
# A secret key=value, in a URL's query or a libpq conninfo string: the value goes up to the
# next separator.
_SECRET_VALUE = re.compile(
    r"(?P<head>(?:^|[?&;\s])(?:" + "|".join(sorted(_SECRET_PARAMS)) + r")=)(?P<value>[^&#;\s'\"]*)",
    re.IGNORECASE,
)


def mask(text: str) -> str:
    """`text` (a URL, or a message quoting URLs) with every password replaced by ***: in each
    URL's userinfo and in secret query parameters (`password=`, `token=`, ...). Only the
    secrets change; the rest of the text is left exactly as it was (never re-encoded).

    Works on malformed URLs too (it never raises), since it is used in error messages."""
    masked = _URL_IN_TEXT.sub(lambda m: _mask_userinfo(m.group(0)), str(text))
    return _SECRET_VALUE.sub(lambda m: m["head"] + ("***" if m["value"] else ""), masked)


def _mask_userinfo(url: str) -> str:
    match = _NETLOC.match(url)
    if not match or "@" not in match["netloc"]:
        return url
    userinfo, _, host = match["netloc"].rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{match['scheme']}{userinfo}@{host}{match['rest']}"


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
