"""The engine's `Session` reads the same statements the same way on both backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from temporal_recall.store.sql._session import Session

from ._support import AnyStore


def _backend(store: AnyStore) -> Any:
    return store._db  # pyright: ignore[reportPrivateUsage]


async def test_numbered_placeholders_and_arrays_read_alike(recall_store: AnyStore) -> None:
    async def body(session: Session) -> tuple[Any, ...]:
        each = session.dialect.each(1, 'bigint')
        values = await session.rows(f'SELECT value FROM {each} ORDER BY value DESC', session.dialect.array([3, 1, 2]))
        repeated = await session.value('SELECT CAST($1 AS BIGINT) + CAST($2 AS BIGINT) + CAST($1 AS BIGINT)', 5, 7)
        larger = await session.value(f'SELECT {session.dialect.greatest}(CAST($1 AS BIGINT), CAST($2 AS BIGINT))', 4, 9)
        missing = await session.one('SELECT 1 WHERE 1 = 0')
        return [int(row[0]) for row in values], int(repeated), int(larger), missing

    assert await _backend(recall_store).run_read(body) == ([3, 2, 1], 17, 9, None)


async def test_a_write_commits_when_the_body_returns_and_rolls_back_when_it_raises(recall_store: AnyStore) -> None:
    backend = _backend(recall_store)
    insert = 'INSERT INTO tenants (scope_key) VALUES ($1)'

    async def keys(session: Session) -> Sequence[Any]:
        return sorted(row[0] for row in await session.rows('SELECT scope_key FROM tenants'))

    async def kept(session: Session) -> None:
        await session.many(insert, [('s:kept-1',), ('s:kept-2',)])

    async def failed(session: Session) -> None:
        await session.run(insert, 's:lost')
        raise RuntimeError('the body failed')

    await backend.run_write(kept)
    with pytest.raises(RuntimeError, match='the body failed'):
        await backend.run_write(failed)
    found = await backend.run_read(keys)
    assert 's:kept-1' in found and 's:kept-2' in found
    assert 's:lost' not in found


async def test_an_array_reads_alike_as_a_filter_and_as_a_driving_join(recall_store: AnyStore) -> None:
    async def body(session: Session) -> tuple[list[int], list[int]]:
        dialect = session.dialect
        numbers = f'SELECT value AS x FROM {dialect.each(1, "bigint")}'
        kept = await session.rows(
            f'SELECT n.x FROM ({numbers}) AS n WHERE n.x {dialect.in_array(2, "bigint")} ORDER BY n.x',
            dialect.array([1, 2, 3, 4]),
            dialect.array([4, 2, 9]),
        )
        joined = await session.rows(
            f'SELECT n.x FROM {dialect.each(2, "bigint")} {dialect.join_in_order} ({numbers}) AS n '
            'ON n.x = value ORDER BY n.x',
            dialect.array([1, 2, 3]),
            dialect.array([3, 1, 7]),
        )
        return [int(row[0]) for row in kept], [int(row[0]) for row in joined]

    assert await _backend(recall_store).run_read(body) == ([2, 4], [1, 3])
