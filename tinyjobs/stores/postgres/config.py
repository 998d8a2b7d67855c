"""Reading a postgresql:// URL: the libpq connection string and tinyjobs' own options."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict

from ...durations import parse_duration
from ...errors import ConfigError
from ...urls import mask, split
from ..deadlines import CONNECT, ROUND_TRIP

DEFAULT_SCHEMA = "tinyjobs"
# Options read by tinyjobs and removed before the URL reaches libpq.
_OWN = {"schema", "listen", "timeout"}
_KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,47}$")


@dataclass(frozen=True)
class Settings:
    """What `open` needs: the libpq URL, the schema and the URL to print (password masked)."""

    url: str
    conninfo: str
    schema: str
    masked: str
    listen: bool = True  # ?listen=off polls instead (PgBouncer transaction pooling drops LISTEN)
    round_trip: float = ROUND_TRIP  # ?timeout=: a request unanswered this long fails (deadlines.py)

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema."""
        return f"tinyjobs_{self.schema}"


def parse(url: str) -> Settings:
    """Settings from a postgresql:// or postgres:// URL; ConfigError (password masked) if bad."""
    scheme, netloc, path, query = split(url)
    if scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"store URL {mask(url)!r} is not a postgresql:// URL")
    try:
        _ = urlsplit(url).port
    except ValueError as err:
        raise ConfigError(f"store URL {mask(url)!r} is malformed: {err}") from None
    schema = query.get("schema", DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.match(schema):
        raise ConfigError(
            f"store URL {mask(url)!r}: schema {schema!r} must be letters, digits and _ "
            "(at most 48), not starting with a digit"
        )
    rest = {k: v for k, v in query.items() if k not in _OWN}
    rest.setdefault("connect_timeout", str(int(CONNECT)))
    # An idle connection whose peer vanished (a host gone, a firewall that drops) is noticed by
    # TCP keepalives within about 25 s instead of the kernel's two hours.
    for name, value in _KEEPALIVES.items():
        rest.setdefault(name, value)
    conninfo = urlunsplit(("postgresql", netloc, path, urlencode(rest), ""))
    try:
        conninfo_to_dict(conninfo)
    except Exception as err:  # psycopg.ProgrammingError: bad parameter or syntax
        raise ConfigError(f"store URL {mask(url)!r} is malformed: {mask(str(err))}") from None
    listen = query.get("listen", "on").lower()
    if listen not in ("on", "off"):
        raise ConfigError(f"store URL {mask(url)!r}: listen must be on or off, got {listen!r}")
    round_trip = ROUND_TRIP
    if "timeout" in query:
        round_trip = parse_duration(query["timeout"], f"store URL {mask(url)!r}: timeout")
        if round_trip <= 0:
            raise ConfigError(f"store URL {mask(url)!r}: timeout must be more than 0 s")
    return Settings(
        url=url,
        conninfo=conninfo,
        schema=schema,
        masked=mask(url),
        listen=listen == "on",
        round_trip=round_trip,
    )
