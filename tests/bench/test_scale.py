"""The scale benchmark's pieces at a tiny size: the generator, each engine, and the report (no timing asserted).

The engines rank with different formulas, but a rare id is in at most a few messages, so every
engine must return exactly the messages that hold it: that proves each engine was fed the same
texts at the same positions, and that each search path (ours through `search_index`) works.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from bench._scale_corpus import LONG_CONVERSATION, MAX_WORDS, MIN_WORDS, QUERY_CLASSES, Corpus, IdSample, rare_ids
from bench._scale_engines import Engine, Fts5, Ours, Tantivy, drop_schema, tantivy_missing, with_schema

from bench import _scale, _scale_report, _scale_semantic
from tests.store._support import postgres_url

MESSAGES = 300


def test_the_corpus_is_streamed_in_hundreds_the_same_each_time() -> None:
    corpus = Corpus(7, 2_500)
    units = list(corpus)
    assert [unit.conversation for unit in units] == [f'c{n}' for n in range(15)] + [LONG_CONVERSATION] * 10
    assert [unit.first for unit in units[15:]] == list(range(0, 1_000, 100))
    assert corpus.unit(3) == units[3]  # regenerated on demand, not kept
    texts = [text for unit in units for text in unit.texts]
    assert len(texts) == 2_500
    lengths = [len(text.split(' ')) - len(rare_ids(text)) for text in texts]
    assert min(lengths) >= MIN_WORDS and max(lengths) <= MAX_WORDS
    assert 0.01 < sum(1 for text in texts if rare_ids(text)) / len(texts) < 0.04
    assert all(re.fullmatch(r'[a-z]+\d{8}', identifier) for text in texts for identifier in rare_ids(text))
    assert Corpus(8, 2_500).unit(0) != units[0]


def test_a_small_corpus_has_a_one_hundred_message_long_conversation() -> None:
    corpus = Corpus(7, MESSAGES)
    assert [unit.conversation for unit in corpus] == ['c0', 'c1', LONG_CONVERSATION]
    with pytest.raises(ValueError, match='multiple of 100'):
        Corpus(7, 250)


def holders(corpus: Corpus) -> dict[str, set[tuple[str, int]]]:
    """Every rare id and the (conversation, position) of each message holding it."""
    found: dict[str, set[tuple[str, int]]] = {}
    for unit in corpus:
        for index, text in enumerate(unit.texts):
            for identifier in rare_ids(text):
                found.setdefault(identifier, set()).add((unit.conversation, unit.first + index))
    return found


async def check_engines_find_every_rare_id(tmp_path: Path, ours_url: str) -> None:
    corpus = Corpus(11, MESSAGES)
    ours = await Ours.open(ours_url, 'ours')
    engines: list[Engine] = [ours, Fts5(tmp_path / 'fts5.db')]
    if tantivy_missing() is None:
        (tmp_path / 'tantivy').mkdir()
        engines.append(Tantivy(tmp_path / 'tantivy'))
    try:
        measured = _scale.Measurement(MESSAGES, 100)
        await _scale.fill(corpus, engines, measured, IdSample())
        expected = holders(corpus)
        assert expected, 'the corpus should hold rare ids'
        for identifier, messages in expected.items():
            for engine in engines:
                for label, search in engine.searches.items():
                    assert set(await search([identifier])) == messages, (label, identifier)
        long_ids = [i for i, messages in expected.items() if any(c == LONG_CONVERSATION for c, _ in messages)]
        for identifier in long_ids:
            hits = await ours.search_conversation([identifier], LONG_CONVERSATION)
            assert set(hits) == {hit for hit in expected[identifier] if hit[0] == LONG_CONVERSATION}
        for engine in engines:
            fill = measured.fills[engine.name]
            assert sum(fill.messages) == MESSAGES and fill.bytes > 0
    finally:
        for engine in engines:
            await engine.close()


def _recorded(write: Any, names: list[str]) -> Any:
    async def recorded(self: Engine, prepared: Any) -> None:
        names.append(self.name)
        await write(self, prepared)

    return recorded


async def test_sqlite_fts5_and_tantivy_find_the_same_rare_ids(tmp_path: Path) -> None:
    await check_engines_find_every_rare_id(tmp_path, str(tmp_path / 'ours.db'))


@pytest.mark.postgres
async def test_postgresql_finds_the_same_rare_ids(tmp_path: Path) -> None:
    url = postgres_url()
    schema = f'bench_test_{uuid.uuid4().hex[:12]}'
    try:
        await check_engines_find_every_rare_id(tmp_path, with_schema(url, schema))
    finally:
        await drop_schema(url, schema)


async def test_a_tiny_run_prints_the_issue_table_and_its_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    for engine in (Ours, Fts5, Tantivy):
        monkeypatch.setattr(engine, 'write', _recorded(engine.write, writes))
    options = _scale.Options(messages=MESSAGES, ours=['sqlite'], directory=tmp_path, queries_per_class=3)
    measured = await _scale.measure(options)
    # ours and FTS5 take turns; tantivy, whose writer works on threads of its own, is filled after them.
    units = MESSAGES // 100
    assert sorted(writes[: 2 * units]) == ['FTS5'] * units + ['ours, SQLite'] * units
    assert writes[2 * units :] == (['tantivy'] * units if tantivy_missing() is None else [])
    assert measured.rare_id_disagreements == 0 and measured.rare_id_queries == 3
    text = _scale_report.report(measured)
    labels = ['ours, SQLite', 'FTS5 OR', 'FTS5 AND'] + (['tantivy OR'] if tantivy_missing() is None else [])
    assert list(measured.scope) == labels
    assert all(sorted(measured.scope[label]) == sorted(QUERY_CLASSES) for label in labels)
    assert f'| | {" | ".join(labels)} |' in text
    assert ('tantivy row skipped' in text) == (tantivy_missing() is not None)
    verdicts = [line for line in text.splitlines() if line.startswith(('PASS', 'FAIL'))]
    # fill vs FTS5, fall, bytes, scope-wide p95, two per class, one conversation; with tantivy, issue 51's
    # p50 and p95 per class for SQLite
    against_tantivy = 2 * len(QUERY_CLASSES) if tantivy_missing() is None else 0
    assert len(verdicts) == 3 + 1 + 2 * len(QUERY_CLASSES) + 1 + against_tantivy
    assert sum('× tantivy' in line for line in verdicts) == against_tantivy
    assert 'peak RSS' in text
    # Each search's memory, alone: where Linux lets the peak be reset, a row beside every latency.
    if _scale.reset_peak():
        assert list(measured.search_rss) == labels
        assert all(peak >= before > 0 for before, peak in measured.search_rss.values())
        row = next(line for line in text.splitlines() if line.startswith('| peak RSS while searching'))
        assert row.count('| +') == len(labels), row


async def test_every_posting_is_timed_beside_the_pruned_search_with_the_same_hits(tmp_path: Path) -> None:
    """`--every-posting`: ours also searched reading every posting, query by query, and the hits compared."""
    options = _scale.Options(
        messages=MESSAGES,
        ours=['sqlite'],
        directory=tmp_path,
        queries_per_class=3,
        fts5=False,
        tantivy=False,
        every_posting=True,
    )
    measured = await _scale.measure(options)
    assert list(measured.scope) == ['ours, SQLite', 'ours, SQLite, every posting']
    assert measured.pruned_queries == 3 * len(QUERY_CLASSES) and measured.pruned_disagreements == 0
    assert 'differ between ours pruned and ours reading every posting: 0 of 9' in _scale_report.report(measured)


async def test_a_tiny_semantic_run_reports_memory_latency_and_recall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bench_search.py --messages N --semantic` at 300 messages: a tenant this small is ranked exactly, so
    the probe's ten nearest are the exact ten (recall 1.000); a second run reuses the filled store."""
    options = _scale_semantic.Options(
        messages=MESSAGES,
        seed=7,
        queries=6,
        store=tmp_path / 'semantic.db',
        before_src=None,
        rounds=1,
        progress=lambda line: None,
    )
    await _scale_semantic.measure(options)
    first = capsys.readouterr().out
    assert 'filled 300 messages' in first
    rows = [line for line in first.splitlines() if line.startswith('| this checkout |')]
    assert len(rows) == 1 and rows[0].endswith('| 1.000 |')
    await _scale_semantic.measure(options)
    assert 'reusing the filled store' in capsys.readouterr().out
