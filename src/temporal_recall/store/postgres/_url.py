"""Reading a `postgresql://` store URL: connection settings for the driver plus the store's own options.

Pure and driver-free on purpose: `open_store` validates a URL (and reports a typo in an option)
before it imports asyncpg or opens a connection, and the error messages never echo the password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from temporal_recall.errors import ConfigurationError

__all__ = ('DEFAULT_SCHEMA', 'SCHEMES', 'PostgresOptions', 'parse_postgres_url', 'redacted')

SCHEMES = ('postgresql', 'postgres')
DEFAULT_SCHEMA = 'temporal_recall'

_SCHEMA_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,62}')
"""Unquoted-identifier characters only, so the name can be quoted without escaping and never surprises."""

_LIBPQ = frozenset(
    {
        'host',
        'port',
        'dbname',
        'database',
        'user',
        'password',
        'passfile',
        'service',
        'sslmode',
        'sslcert',
        'sslkey',
        'sslrootcert',
        'sslcrl',
        'sslpassword',
        'sslnegotiation',
        'ssl_min_protocol_version',
        'ssl_max_protocol_version',
        'target_session_attrs',
        'krbsrvname',
        'gsslib',
        'application_name',
    }
)
"""Connection parameters passed through to asyncpg unchanged. Anything else asyncpg would send to the
server as a setting, turning a typo into a confusing server error, so unknown names are refused here."""

_TRUE = {'1', 'true', 'yes', 'on'}
_FALSE = {'0', 'false', 'no', 'off'}


@dataclass(frozen=True, kw_only=True)
class PostgresOptions:
    """Everything needed to open a PostgreSQL store; built by `parse_postgres_url` or directly."""

    dsn: str
    """The URL handed to asyncpg: the original one without the store options below."""
    display: str = ''
    """The URL without password or options, for messages and `stats()`."""
    schema: str = DEFAULT_SCHEMA
    pool_min: int = 1
    pool_max: int = 10
    acquire_timeout_ms: int = 10_000
    """How long an operation waits for a free pooled connection before `StoreUnavailable`."""
    connect_timeout_ms: int = 10_000
    statement_timeout_ms: int = 0
    """The server-side `statement_timeout`; 0 leaves the server's default."""
    read_only: bool = False
    create: bool = True
    """Whether an empty schema becomes a store; with False it is refused as `NoStore` and left as it is."""

    def __post_init__(self) -> None:
        if not _SCHEMA_NAME.fullmatch(self.schema):
            raise ConfigurationError(
                f'Store URL option schema={self.schema!r} is not a plain PostgreSQL identifier; use letters, '
                'digits and underscores (not starting with a digit), at most 63 characters.'
            )
        if self.pool_max < 1:
            raise ConfigurationError(f'Store URL option pool_max={self.pool_max} must be at least 1.')
        if not 0 <= self.pool_min <= self.pool_max:
            raise ConfigurationError(
                f'Store URL option pool_min={self.pool_min} must be between 0 and pool_max ({self.pool_max}).'
            )
        if not self.display:
            object.__setattr__(self, 'display', redacted(self.dsn))


def redacted(url: str) -> str:
    """`url` without its password and query string: safe to print or log."""
    parts = urlsplit(url)
    userinfo, at, hostinfo = parts.netloc.rpartition('@')
    user = userinfo.partition(':')[0]
    netloc = f'{user}{at}{hostinfo}' if at else hostinfo
    return urlunsplit((parts.scheme, netloc, parts.path, '', ''))


def _whole(name: str, value: str) -> int:
    if not value.isdigit():
        raise ConfigurationError(f'Store URL option {name}={value!r} must be a whole number.')
    return int(value)


def url_flag(name: str, value: str) -> bool:
    """A store URL option that is true or false."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigurationError(f'Store URL option {name}={value!r} must be true or false.')


def parse_postgres_url(url: str) -> PostgresOptions:
    """Split a `postgresql://` URL into the driver's DSN and the store options (see `open_store`).

    Raises:
        ConfigurationError: Another scheme, an unknown option or an option value that cannot work.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ConfigurationError(f'Store URL {redacted(url)!r} is not a postgresql:// URL.')
    passed: list[tuple[str, str]] = []
    values: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _LIBPQ:
            passed.append((name, value))
        elif name in _OPTIONS:
            values[name] = value
        else:
            raise ConfigurationError(
                f'Store URL option {name!r} is unknown. Store options: {", ".join(sorted(_OPTIONS))}; '
                f'connection parameters: {", ".join(sorted(_LIBPQ))}.'
            )
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(passed), parts.fragment))
    return PostgresOptions(
        dsn=dsn,
        schema=values.get('schema', DEFAULT_SCHEMA),
        pool_min=_whole('pool_min', values['pool_min']) if 'pool_min' in values else 1,
        pool_max=_whole('pool_max', values['pool_max']) if 'pool_max' in values else 10,
        acquire_timeout_ms=_whole('acquire_timeout_ms', values.get('acquire_timeout_ms', '10000')),
        connect_timeout_ms=_whole('connect_timeout_ms', values.get('connect_timeout_ms', '10000')),
        statement_timeout_ms=_whole('statement_timeout_ms', values.get('statement_timeout_ms', '0')),
        read_only=url_flag('read_only', values.get('read_only', 'false')),
    )


_OPTIONS = frozenset(
    {'schema', 'pool_min', 'pool_max', 'acquire_timeout_ms', 'connect_timeout_ms', 'statement_timeout_ms', 'read_only'}
)
