"""`open_store(url)`: a store from a URL or path, the way settings and the CLI name one."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from temporal_recall.embeddings._source import EmbedderSource, as_embedder
from temporal_recall.errors import ConfigurationError, NoStore, NotADatabase

from .postgres._url import SCHEMES, parse_postgres_url, url_flag
from .sqlite._connection import Synchronous
from .sqlite._store import SqliteConversationStore

if TYPE_CHECKING:
    from .postgres._store import PostgresConversationStore

__all__ = ('open_store', 'sqlite_path')


def _split(url: str) -> tuple[str, str]:
    """`(path, query)` of a `sqlite:` URL, SQLAlchemy style: what follows `sqlite:///` is the path as written."""
    if url.startswith('sqlite:///'):
        rest = url[len('sqlite:///') :]
    elif url.startswith('sqlite://'):
        raise ConfigurationError(
            f'Store URL {url!r} has a host part; write sqlite:///relative/path.db or sqlite:////absolute/path.db.'
        )
    else:
        rest = url[len('sqlite:') :]
    path, _, query = rest.partition('?')
    if not path:
        raise ConfigurationError(f'Store URL {url!r} names no database file.')
    return path, query


def _scheme(url: str | os.PathLike[str]) -> str:
    """`sqlite`, `postgresql`, another URL scheme, or `''` for a plain path."""
    if isinstance(url, os.PathLike) or not ('://' in url or url.startswith('sqlite:')):
        return ''
    return url.partition(':')[0].lower()


def sqlite_path(url: str | os.PathLike[str]) -> Path | None:
    """The file a SQLite store URL or path names, as written (a relative one stays relative), or
    `None` for a PostgreSQL URL.

    Raises:
        ConfigurationError: An unknown scheme, or a `sqlite:` URL with a host part or no file.
    """
    scheme = _scheme(url)
    if not scheme:
        return Path(url)
    if scheme in SCHEMES:
        return None
    if scheme != 'sqlite':
        raise ConfigurationError(
            f'Store URL scheme {scheme!r} is not supported. Use a path, sqlite:///path.db or postgresql://….'
        )
    return Path(_split(str(url))[0])


def _relative_note(url: str) -> str:
    """What a `sqlite:///` URL with a relative path means, for an error about its file; else `''`.

    Three slashes read like an absolute path (`sqlite:///tmp/x.db`), but the third is the URL's
    separator, so the path is `tmp/x.db` under the working directory: say where that is, and how
    to write the absolute path the user probably meant.
    """
    if not url.startswith('sqlite:///') or url.startswith('sqlite:////'):
        return ''
    path = _split(url)[0]
    return (
        f' (sqlite:///{path} is relative to the working directory: {Path(path).absolute()}; '
        f'for /{path} write sqlite:////{path})'
    )


async def open_store(
    url: str | os.PathLike[str], *, create: bool = True, embedder: EmbedderSource | None = None
) -> SqliteConversationStore | PostgresConversationStore:
    """Open the store a URL or path names; with `create=False` only one that exists (what reading needs).

    `embedder` (an `Embedder`, an `EmbeddingModel` or a model name such as
    `temporal_recall.embeddings.LOCAL_MODEL`) is the store's: it embeds what pydantic-ai's `save` writes
    (a chat UI adapter's `conversation_store=`), and a `ConversationRecall(store=...)` or a search of this
    store without an embedder of its own uses it (see `EngineStore.embedder`).

    Accepted forms (the `sqlite:` ones follow SQLAlchemy's convention):

    - a filesystem path: `conversations.db`, `/var/lib/recall/conversations.db`
    - `sqlite:///relative/path.db` (three slashes, then a relative path),
      `sqlite:////absolute/path.db` (three slashes, then an absolute path), or `sqlite:relative.db`,
      with options as a query string: `?busy_timeout_ms=10000&synchronous=FULL&read_only=true`
    - `postgresql://user:password@host:5432/database` (or `postgres://…`): a PostgreSQL store, which
      many workers can share. Needs the driver: `pip install "temporal-recall[postgres]"`. Options,
      as a query string (`?schema=recall&pool_max=20`):

      - `schema` (default `temporal_recall`): the PostgreSQL schema holding the store's tables,
        created on first open; stores in different schemas of one database are independent.
      - `pool_min` / `pool_max` (default 1 / 10): connections this store keeps open / may open.
      - `acquire_timeout_ms` (default 10000): how long an operation waits for a free connection
        before raising `StoreUnavailable`.
      - `connect_timeout_ms` (default 10000) and `statement_timeout_ms` (default 0: the server's).
      - `read_only` (default false): refuse writes without contacting the server.
      - libpq connection parameters (`sslmode`, `sslrootcert`, `application_name`, `host`,
        `passfile`, …) are passed to the driver unchanged; any other name is refused.

    Raises:
        NoStore: `create=False`, and no SQLite file or an empty PostgreSQL schema is there.
        ConfigurationError: An unknown scheme, option or option value; asyncpg missing for a
            PostgreSQL URL; or the PostgreSQL server refused the login.
        NotADatabase, SchemaTooNew, StoreReadOnly, StoreUnavailable: see `SqliteConversationStore.open`
            and `PostgresConversationStore.open`.
    """
    meaning = as_embedder(embedder)
    opened = await _open(url, create=create)
    if meaning is not None:
        opened.embedder = meaning
    return opened


async def _open(url: str | os.PathLike[str], *, create: bool) -> SqliteConversationStore | PostgresConversationStore:
    path = sqlite_path(url)
    if path is None:
        return await _open_postgres(str(url), create=create)
    if not _scheme(url):
        return await SqliteConversationStore.open(_existing(path, create))
    url = str(url)
    query = _split(url)[1]
    busy_timeout_ms = 5000
    synchronous: Synchronous = 'NORMAL'
    read_only = False
    for name, values in parse_qs(query, keep_blank_values=True).items():
        value = values[-1]
        if name == 'busy_timeout_ms':
            if not value.isdigit():
                raise ConfigurationError(f'Store URL option busy_timeout_ms={value!r} must be a whole number of ms.')
            busy_timeout_ms = int(value)
        elif name == 'synchronous':
            if value.upper() == 'NORMAL':
                synchronous = 'NORMAL'
            elif value.upper() == 'FULL':
                synchronous = 'FULL'
            else:
                raise ConfigurationError(f'Store URL option synchronous={value!r} must be NORMAL or FULL.')
        elif name == 'read_only':
            read_only = url_flag(name, value)
        else:
            raise ConfigurationError(
                f'Store URL option {name!r} is unknown; use busy_timeout_ms, synchronous or read_only.'
            )
    note = _relative_note(url)
    try:
        return await SqliteConversationStore.open(
            _existing(path, create, note), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous, read_only=read_only
        )
    except NotADatabase as error:
        if not note or isinstance(error, NoStore):
            raise
        raise NotADatabase(f'{error}{note}') from error


def _existing(path: Path, create: bool, note: str = '') -> Path:
    """`path`, unless it must exist and does not (a stat: opening the file would create it)."""
    if not create and not path.exists():
        raise NoStore(f'at {path}{note}')
    return path


async def _open_postgres(url: str, *, create: bool) -> PostgresConversationStore:
    """Validate the URL's options first, then import the driver: a typo is reported even without asyncpg."""
    options = dataclasses.replace(parse_postgres_url(url), create=create)
    try:
        from .postgres._store import PostgresConversationStore
    except ModuleNotFoundError as error:
        if error.name != 'asyncpg':
            raise
        raise ConfigurationError(
            f'Store URL {options.display} names a PostgreSQL store, which needs the asyncpg driver: '
            'pip install "temporal-recall[postgres]".'
        ) from error
    return await PostgresConversationStore.open(options)
