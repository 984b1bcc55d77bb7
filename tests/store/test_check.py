"""`check()`: clean on every healthy store the writers produce, and each kind of damage is found."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation

from temporal_recall.store import CheckReport
from temporal_recall.store.postings import _segments

from ._support import AT, AnyStore, PostgresSite, Site, append_after, column_of, reply, turn, user, with_options


def user_prompts(*texts: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(text, timestamp=AT) for text in texts], timestamp=AT)


async def _healthy(store: AnyStore) -> None:
    """Forks across scopes that carry on, a rewritten branch, a delete, codec bodies, runs and none."""
    history = await append_after(store, 'a1', 'acme', [], [*turn(1, 'invoice'), *turn(2, 'refund')])
    await store.fork('a1', new_conversation_id='g', scope='globex', source_scope='acme')
    await append_after(store, 'g', 'globex', history, turn(3, 'secret'))
    await store.fork('a1', new_conversation_id='a2', scope='acme', source_scope='acme', at=2)
    await append_after(store, 'a2', 'acme', history[:2], turn(4, 'paris'))
    await append_after(store, 'a1', 'acme', history[:2], turn(5, 'rewritten'))
    await append_after(store, 'n', None, [], turn(6, 'unscoped'))
    doomed = await append_after(store, 'gone', 'acme', [], turn(7, 'invoice'))
    record = await store.read_record('gone')
    assert record is not None and doomed
    await store.delete_record('gone', expected_revision=record.revision)
    body = b'{"hello": "world"}'
    await store.put_bodies('acme', {hashlib.sha256(body).hexdigest(): body})


async def _damage(site: Site, *statements: str) -> None:
    """Run raw statements on the store's database, past its foreign keys, as a bad disk or hand would."""
    if isinstance(site, PostgresSite):
        import asyncpg

        connection = await asyncpg.connect(
            with_options(site.base_url.partition('?')[0]), server_settings={'search_path': site.schema}
        )
        try:
            await connection.execute("SET session_replication_role = 'replica'")
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()
        return
    with closing(sqlite3.connect(site.path)) as connection:
        for statement in statements:
            connection.execute(statement)
        connection.commit()


def _kinds(report: CheckReport) -> set[str]:
    return {finding.kind for finding in report.findings}


def _details(report: CheckReport) -> str:
    return '\n'.join(map(str, report.findings))


async def test_a_healthy_store_is_clean(recall_store: AnyStore):
    await _healthy(recall_store)
    report = await recall_store.check()
    assert report.clean, _details(report)
    assert report.conversations == 4
    assert report.entries > 10
    assert report.documents > 0 and report.postings > 0 and report.bodies == 1
    await recall_store.reindex()
    report = await recall_store.check()
    assert report.clean, _details(report)


async def test_an_empty_store_is_clean(recall_store: AnyStore):
    report = await recall_store.check()
    assert report.clean and report.entries == 0


DAMAGE: dict[str, tuple[Sequence[str], str, str]] = {
    'deleted block': (
        ['DELETE FROM posting_blocks WHERE first_doc = (SELECT min(first_doc) FROM posting_blocks)'],
        'index',
        'lists terms without postings',
    ),
    'block count': (
        ['UPDATE posting_blocks SET count = count + 1 WHERE first_doc = (SELECT min(first_doc) FROM posting_blocks)'],
        'index',
        'postings; it holds',
    ),
    'truncated block': (
        ['UPDATE posting_blocks SET postings = substr(postings, 1, 5)'],
        'index',
        'holds postings that do not decode',
    ),
    'truncated pending postings': (
        ['UPDATE pending_postings SET postings = substr(postings, 1, 5)'],
        'index',
        'hold postings that do not decode',
    ),
    'segment counter': (
        ['UPDATE index_segments SET document_count = document_count + 1'],
        'index',
        'documents of total length',
    ),
    'term count': (
        ['UPDATE term_documents SET document_count = document_count + 1'],
        'index',
        'postings hold the term',
    ),
    'document role': (
        ["UPDATE documents SET role = 'system' WHERE doc_id = (SELECT min(doc_id) FROM documents)"],
        'index',
        "has role 'system', but its text has index terms of only 'user'",
    ),
    'occurrence count': (
        ['UPDATE conversation_documents SET occurrences = occurrences + 1'],
        'index',
        'indexed entries of the conversation hold it',
    ),
    'edited message': (
        ["UPDATE entries SET message = replace(message, 'invoice', 'invoicf')"],
        'content_hash',
        'whose hash is not the stored content hash',
    ),
    'message that is not valid Unicode': (
        # A JSON escape of half a UTF-16 pair: the row loads, but no message can hold it.
        ["UPDATE entries SET message = replace(message, 'invoice', 'invoice\\ud800')"],
        'content_hash',
        'cannot be read',
    ),
    'edited codec body': (
        ['UPDATE message_bodies SET body = body || body'],
        'content_hash',
        'holds bytes with another SHA-256',
    ),
    'parent not stored': (
        ['UPDATE entries SET parent_key = 999999 WHERE entry_key = (SELECT max(entry_key) FROM entries)'],
        'chain',
        'which is not stored',
    ),
    'parent out of place': (
        [
            'UPDATE entries SET parent_key = (SELECT min(entry_key) FROM entries) '
            'WHERE entry_key = (SELECT entry_key FROM entries ORDER BY position DESC, entry_key LIMIT 1)'
        ],
        'chain',
        'under a parent at',
    ),
    'conversation in another tenant': (
        [
            'UPDATE conversations SET tenant_id = (SELECT tenant_id FROM tenants '
            "WHERE scope_key = 's:globex') WHERE conversation_id = 'a2'"
        ],
        'scope',
        "has scope 'acme' but is filed under tenant 's:globex'",
    ),
    'posting in another tenant': (
        [
            f"UPDATE {table} SET tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = 's:globex') "
            "WHERE tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = 'n:')"
            for table in ('posting_blocks', 'pending_postings')
        ],
        'scope',
        'its document under tenant',
    ),
}


@pytest.mark.parametrize('damage', list(DAMAGE))
async def test_each_kind_of_damage_is_found(site: Site, damage: str, monkeypatch: pytest.MonkeyPatch):
    statements, kind, detail = DAMAGE[damage]
    # Every second write of a tenant merges its segments: the store holds both blocks and pending postings.
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 2)
    store = await site.open()
    try:
        await _healthy(store)
        assert (await store.check()).clean
        assert await column_of(store, 'SELECT count(*) FROM pending_postings') != [0]
        assert await column_of(store, 'SELECT count(*) FROM posting_blocks') != [0]
    finally:
        await store.close()
    await _damage(site, *statements)
    store = await site.open()
    try:
        report = await store.check()
    finally:
        await store.close()
    assert not report.clean
    assert kind in _kinds(report), _details(report)
    assert any(finding.kind == kind and detail in finding.detail for finding in report.findings), _details(report)


async def test_a_body_that_references_a_missing_body_is_found(recall_store: AnyStore):
    """A codec body names the bodies it is made of; one the store lost (or never got) is a finding."""

    def body(value: object) -> tuple[str, bytes]:
        data = json.dumps(value, separators=(',', ':')).encode()
        return hashlib.sha256(data).hexdigest(), data

    leaf_hash, leaf = body({'kind': 'request', 'parts': []})
    chunk_hash, chunk = body([{'$recall': leaf_hash}])
    root_hash, root = body({'messages': [{'$recall-items': chunk_hash}]})
    await recall_store.put_bodies('acme', {root_hash: root, chunk_hash: chunk})
    await recall_store.put_bodies('globex', {leaf_hash: leaf})  # another scope's copy does not count
    report = await recall_store.check()
    assert _details(report) == (
        f"body: message body {chunk_hash} (tenant 's:acme'): references body {leaf_hash}, "
        'which the store does not hold in its scope'
    )
    await recall_store.put_bodies('acme', {leaf_hash: leaf})
    assert (await recall_store.check()).clean


OSLO, MADRID = 'What is the weather in Oslo?', 'And in Madrid?'
REPEATS: dict[str, tuple[list[m.ModelMessage], str]] = {
    # What a chat turn after a failed model call stored before such turns were read as one (issue 40).
    'a request twice': ([user_prompts(OSLO, MADRID), user_prompts(OSLO, MADRID), reply('Sunny.')], '0 and 1'),
    'a resent prompt': ([user_prompts(OSLO, OSLO, MADRID), user_prompts(OSLO, OSLO, MADRID)], '0 and 0'),
    'a pending request again': ([reply('Hello.'), user(OSLO), user_prompts(MADRID, OSLO, MADRID)], '1 and 2'),
}


@pytest.mark.parametrize('shape', list(REPEATS))
async def test_a_turn_said_twice_in_a_row_is_found(recall_store: AnyStore, shape: str):
    messages, positions = REPEATS[shape]
    await recall_store.save(Conversation(messages=messages, conversation_id='twice'), scope='acme')
    report = await recall_store.check()
    assert [(finding.kind, finding.location) for finding in report.findings] == [('history', "conversation 'twice'")]
    assert f'at positions {positions}' in report.findings[0].detail


async def test_a_prompt_said_again_after_its_answer_is_no_finding(recall_store: AnyStore):
    said = [user(OSLO), reply('Sunny.'), user(OSLO), reply('Still sunny.'), user_prompts(OSLO, MADRID)]
    await recall_store.save(Conversation(messages=said, conversation_id='again'), scope='acme')
    assert (await recall_store.check()).clean
