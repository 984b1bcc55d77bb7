"""The worker's health endpoint over real loopback HTTP, and the metrics it serves."""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from temporal_recall import _metrics
from temporal_recall._metrics import (
    INDEX_DOCUMENTS,
    MESSAGES_STORED,
    SEARCH_SECONDS,
    STEP_WRITES,
    Counter,
    Gauge,
    Histogram,
    Registry,
    sdk_metrics_port,
    temporal_runtime,
)
from temporal_recall.errors import ConfigurationError
from temporal_recall.worker._health import MAX_HEAD_BYTES, HealthServer

PRODUCT_METRICS = (
    'temporal_recall_step_writes_total',
    'temporal_recall_messages_stored_total',
    'temporal_recall_search_seconds',
    'temporal_recall_index_documents',
)
READ_TIMEOUT = 0.5


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def parse_response(raw: bytes) -> Response:
    head, separator, body = raw.partition(b'\r\n\r\n')
    assert separator, f'no end of headers in {raw!r}'
    status_line, *header_lines = head.decode('ascii').split('\r\n')
    version, status, _reason = status_line.split(' ', 2)
    assert version == 'HTTP/1.1'
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(':')
        headers[name.strip().lower()] = value.strip()
    assert int(headers['content-length']) == len(body), 'Content-Length must match the body'
    return Response(int(status), headers, body)


async def exchange(port: int, raw: bytes, *, deadline: float = 5.0) -> bytes:
    """Send `raw`, then read until the server closes; return everything it sent."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    try:
        if raw:
            writer.write(raw)
            await writer.drain()
        async with asyncio.timeout(deadline):
            return await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()


async def get(port: int, path: str, *, method: str = 'GET') -> Response:
    raw = await exchange(port, f'{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n'.encode())
    return parse_response(raw)


@pytest.fixture
async def server() -> AsyncIterator[HealthServer]:
    health = HealthServer(0, host='127.0.0.1', read_timeout=READ_TIMEOUT)
    await health.start()
    try:
        yield health
    finally:
        await health.stop()


# --- routes ---------------------------------------------------------------------------------------


async def test_healthz_answers_ok_and_closes(server: HealthServer) -> None:
    response = await get(server.port, '/healthz')
    assert response.status == 200
    assert response.body == b'ok\n'
    assert response.headers['connection'] == 'close'
    assert response.headers['content-type'].startswith('text/plain')


async def test_query_string_is_ignored(server: HealthServer) -> None:
    assert (await get(server.port, '/healthz?verbose=1')).status == 200


async def test_readyz_follows_mark_ready_and_mark_stopping(server: HealthServer) -> None:
    before = await get(server.port, '/readyz')
    assert before.status == 503
    assert b'not started polling' in before.body

    server.mark_ready()
    assert (await get(server.port, '/readyz')).status == 200

    server.mark_stopping()
    during = await get(server.port, '/readyz')
    assert during.status == 503
    assert b'shutting down' in during.body
    # Liveness is unaffected by draining: the kubelet must not restart a pod that is finishing work.
    assert (await get(server.port, '/healthz')).status == 200


class FakeWorker:
    def __init__(self) -> None:
        self.is_running = False


async def test_readyz_is_derived_from_the_worker() -> None:
    worker = FakeWorker()
    async with HealthServer(0, host='127.0.0.1', worker=worker) as health:
        assert (await get(health.port, '/readyz')).status == 503
        worker.is_running = True
        assert (await get(health.port, '/readyz')).status == 200
        health.mark_stopping()
        assert (await get(health.port, '/readyz')).status == 503


async def test_unknown_path_is_404(server: HealthServer) -> None:
    response = await get(server.port, '/admin')
    assert response.status == 404
    assert b'/healthz' in response.body


@pytest.mark.parametrize('method', ['POST', 'PUT', 'DELETE', 'HEAD'])
async def test_non_get_is_405(server: HealthServer, method: str) -> None:
    response = await get(server.port, '/healthz', method=method)
    assert response.status == 405
    assert response.headers['allow'] == 'GET'


MALFORMED = [b'GARBAGE\r\n\r\n', b'GET /healthz\r\n\r\n', b'GET /healthz HTTP/2.0\r\n\r\n', b'\xff /x HTTP/1.1\r\n\r\n']


@pytest.mark.parametrize('line', MALFORMED)
async def test_malformed_request_line_is_400(server: HealthServer, line: bytes) -> None:
    assert parse_response(await exchange(server.port, line)).status == 400


async def test_http_1_0_request_is_answered(server: HealthServer) -> None:
    assert parse_response(await exchange(server.port, b'GET /healthz HTTP/1.0\r\n\r\n')).status == 200


# --- abuse ----------------------------------------------------------------------------------------


async def test_oversized_head_is_rejected_with_431(server: HealthServer) -> None:
    raw = b'GET /healthz HTTP/1.1\r\nX-Padding: ' + b'a' * (MAX_HEAD_BYTES + 100) + b'\r\n\r\n'
    response = parse_response(await exchange(server.port, raw))
    assert response.status == 431


async def test_endless_head_is_rejected_with_431(server: HealthServer) -> None:
    """A head that never ends is cut off at the size limit, not read until memory runs out."""
    raw = b'GET /healthz HTTP/1.1\r\n' + b'X-A: b\r\n' * (MAX_HEAD_BYTES // 4)
    assert parse_response(await exchange(server.port, raw)).status == 431


async def test_silent_client_is_dropped_after_the_read_timeout(server: HealthServer) -> None:
    started = time.monotonic()
    raw = await exchange(server.port, b'', deadline=READ_TIMEOUT + 3)
    elapsed = time.monotonic() - started
    assert parse_response(raw).status == 408
    assert READ_TIMEOUT * 0.8 <= elapsed < READ_TIMEOUT + 3


async def test_trickling_client_is_dropped_after_the_read_timeout(server: HealthServer) -> None:
    """The deadline covers the whole head, so sending a byte now and then does not extend it."""
    reader, writer = await asyncio.open_connection('127.0.0.1', server.port)

    async def trickle() -> None:
        for byte in b'GET /healthz HTTP/1.1\r\n' + b'X-Slow: ' + b'z' * 200:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    trickler = asyncio.create_task(trickle())
    started = time.monotonic()
    try:
        async with asyncio.timeout(READ_TIMEOUT + 3):
            raw = await reader.read()
        assert parse_response(raw).status == 408
        assert time.monotonic() - started < READ_TIMEOUT + 2
        assert not trickler.done(), 'the client was still sending when it was cut off'
    finally:
        trickler.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await trickler
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_client_that_hangs_up_mid_request_does_not_hurt_the_server(server: HealthServer) -> None:
    _reader, writer = await asyncio.open_connection('127.0.0.1', server.port)
    writer.write(b'GET /hea')
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    assert (await get(server.port, '/healthz')).status == 200


async def test_connections_beyond_the_limit_are_closed_unanswered() -> None:
    async with HealthServer(0, host='127.0.0.1', read_timeout=2, max_connections=1) as health:
        _idle_reader, idle = await asyncio.open_connection('127.0.0.1', health.port)
        try:
            await asyncio.sleep(0.1)  # let the server accept the idle connection first
            try:
                answer = await exchange(health.port, b'GET /healthz HTTP/1.1\r\n\r\n', deadline=1)
            except ConnectionResetError:  # closed with the request unread: the kernel resets
                answer = b''
            assert answer == b''
        finally:
            idle.close()
            await idle.wait_closed()
        await asyncio.sleep(0.1)
        assert (await get(health.port, '/healthz')).status == 200


async def test_stop_cuts_off_open_connections_and_frees_the_port() -> None:
    health = HealthServer(0, host='127.0.0.1', read_timeout=30)
    await health.start()
    reader, writer = await asyncio.open_connection('127.0.0.1', health.port)
    try:
        await asyncio.sleep(0.1)
        async with asyncio.timeout(5):
            await health.stop()
            assert await reader.read() == b''
    finally:
        writer.close()
        await writer.wait_closed()
    again = HealthServer(health.port, host='127.0.0.1')
    await again.start()
    await again.stop()


async def test_busy_port_names_the_setting(server: HealthServer) -> None:
    with pytest.raises(ConfigurationError, match='TEMPORAL_RECALL_HEALTH_PORT'):
        await HealthServer(server.port, host='127.0.0.1').start()


def test_port_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigurationError, match='TEMPORAL_RECALL_HEALTH_PORT'):
        HealthServer(70000)


async def test_a_standard_client_can_read_it(server: HealthServer) -> None:
    """urllib is what the Dockerfile's HEALTHCHECK uses."""

    def fetch(path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{server.port}{path}', timeout=5) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read()

    assert await asyncio.to_thread(fetch, '/healthz') == (200, b'ok\n')
    assert (await asyncio.to_thread(fetch, '/readyz'))[0] == 503


# --- /metrics -------------------------------------------------------------------------------------

SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})?'
    r' (?P<value>\S+)(?: -?\d+)?'
)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {'counter', 'gauge', 'histogram', 'summary', 'untyped'}


@dataclass
class Family:
    type: str
    help: str
    samples: list[tuple[str, dict[str, str], float]]


def family_of(sample: str, families: dict[str, Family]) -> str:
    if sample in families:
        return sample
    for suffix in ('_bucket', '_sum', '_count'):
        base = sample.removesuffix(suffix)
        if base != sample and base in families and families[base].type in ('histogram', 'summary'):
            return base
    raise AssertionError(f'sample {sample} has no # TYPE line before it')


def parse_exposition(text: str) -> dict[str, Family]:
    """A strict reader of text format 0.0.4: every line must be HELP, TYPE or a typed sample."""
    assert text.endswith('\n'), 'the exposition must end with a newline'
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith('# HELP '):
            name, _, doc = line[len('# HELP ') :].partition(' ')
            assert name not in helps, f'line {number}: second HELP for {name}'
            helps[name] = doc
        elif line.startswith('# TYPE '):
            name, _, kind = line[len('# TYPE ') :].partition(' ')
            assert kind in TYPES, f'line {number}: unknown type {kind!r}'
            assert name not in families, f'line {number}: second TYPE for {name}'
            families[name] = Family(kind, helps.get(name, ''), [])
        elif line.startswith('#') or not line.strip():
            continue
        else:
            match = SAMPLE.fullmatch(line)
            assert match, f'line {number} is not a valid sample: {line!r}'
            labels = dict(LABEL.findall(match['labels'] or ''))
            value = float(match['value'])  # accepts NaN, +Inf, -Inf as the format does
            families[family_of(match['name'], families)].samples.append((match['name'], labels, value))
    return families


def check_histogram(name: str, family: Family) -> None:
    buckets = [(labels['le'], value) for sample, labels, value in family.samples if sample == f'{name}_bucket']
    assert buckets, f'{name} has no buckets'
    assert buckets[-1][0] == '+Inf'
    bounds = [float(le) for le, _ in buckets]
    assert bounds == sorted(bounds), 'buckets must be in increasing order'
    counts = [value for _, value in buckets]
    assert counts == sorted(counts), 'bucket counts must be cumulative'
    count = next(value for sample, _, value in family.samples if sample == f'{name}_count')
    assert counts[-1] == count, 'the +Inf bucket must equal _count'
    assert any(sample == f'{name}_sum' for sample, _, _ in family.samples)


async def test_metrics_serves_the_product_metrics_in_exposition_format(server: HealthServer) -> None:
    steps_before = STEP_WRITES.value()
    STEP_WRITES.inc()
    MESSAGES_STORED.inc(3)
    SEARCH_SECONDS.observe(0.004)
    INDEX_DOCUMENTS.set(42)

    response = await get(server.port, '/metrics')
    assert response.status == 200
    assert response.headers['content-type'] == 'text/plain; version=0.0.4; charset=utf-8'
    families = parse_exposition(response.body.decode())

    assert set(PRODUCT_METRICS) <= set(families)
    assert families['temporal_recall_step_writes_total'].type == 'counter'
    assert families['temporal_recall_messages_stored_total'].type == 'counter'
    assert families['temporal_recall_search_seconds'].type == 'histogram'
    assert families['temporal_recall_index_documents'].type == 'gauge'
    for name, family in families.items():
        assert family.help, f'{name} has no HELP text'
        if family.type == 'histogram':
            check_histogram(name, family)
    steps = families['temporal_recall_step_writes_total'].samples
    assert steps == [('temporal_recall_step_writes_total', {}, steps_before + 1)]
    assert families['temporal_recall_index_documents'].samples[0][2] == 42


async def test_metrics_failure_is_a_500_not_a_dead_server() -> None:
    def broken() -> str:
        raise RuntimeError('boom')

    async with HealthServer(0, host='127.0.0.1', metrics=broken) as health:
        assert (await get(health.port, '/metrics')).status == 500
        assert (await get(health.port, '/healthz')).status == 200


# --- the registry ---------------------------------------------------------------------------------


def test_exported_names_are_the_four_product_metrics() -> None:
    assert [STEP_WRITES.name, MESSAGES_STORED.name, SEARCH_SECONDS.name, INDEX_DOCUMENTS.name] == list(PRODUCT_METRICS)
    assert set(PRODUCT_METRICS) <= set(_metrics.REGISTRY.names())


def test_counter_only_goes_up() -> None:
    counter = Counter('c_total', 'c')
    counter.inc()
    counter.inc(2.5)
    assert counter.value() == 3.5
    with pytest.raises(ValueError, match='only increase'):
        counter.inc(-1)


def test_gauge_goes_both_ways() -> None:
    gauge = Gauge('g', 'g')
    gauge.set(10)
    gauge.inc(5)
    gauge.dec(2)
    assert gauge.value() == 13


def test_labels_must_match_the_declared_set() -> None:
    counter = Counter('labelled_total', 'l', labelnames=('backend',))
    counter.inc(backend='sqlite')
    counter.inc(2, backend='postgres')
    with pytest.raises(ValueError, match='takes backend'):
        counter.inc()
    with pytest.raises(ValueError, match='takes backend'):
        counter.inc(backend='x', extra='y')
    registry = Registry()
    registry.register(counter)
    families = parse_exposition(registry.render())
    assert families['labelled_total'].samples == [
        ('labelled_total', {'backend': 'postgres'}, 2),
        ('labelled_total', {'backend': 'sqlite'}, 1),
    ]


def test_label_values_are_escaped() -> None:
    gauge = Gauge('escaped', 'help with \\ and\nnewline', labelnames=('path',))
    gauge.set(1, path='a"b\\c\nd')
    text = gauge.render()
    assert 'escaped{path="a\\"b\\\\c\\nd"} 1' in text
    assert '# HELP escaped help with \\\\ and\\nnewline' in text
    parse_exposition(text)


@pytest.mark.parametrize('bad', ['1abc', 'has space', 'dash-ed', ''])
def test_invalid_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match='invalid'):
        Counter(bad, 'x')
    with pytest.raises(ValueError, match='invalid'):
        Counter('ok_total', 'x', labelnames=(bad or '__reserved',))


def test_histogram_le_is_inclusive_and_buckets_are_cumulative() -> None:
    histogram = Histogram('h_seconds', 'h', buckets=(0.1, 1, 10))
    for value in (0.05, 0.1, 0.5, 1, 50):
        histogram.observe(value)
    cumulative, total, count = histogram.snapshot()
    assert cumulative == [2, 4, 4, 5]  # 0.1 is in le=0.1; 1 is in le=1; 50 only in +Inf
    assert count == 5
    assert math.isclose(total, 51.65)
    family = parse_exposition(histogram.render())['h_seconds']
    check_histogram('h_seconds', family)


def test_histogram_refuses_bad_buckets_and_le_label() -> None:
    with pytest.raises(ValueError, match='strictly increasing'):
        Histogram('h1', 'h', buckets=(1, 1))
    with pytest.raises(ValueError, match='finite'):
        Histogram('h2', 'h', buckets=(math.inf,))
    with pytest.raises(ValueError, match='reserved'):
        Histogram('h3', 'h', buckets=(1,), labelnames=('le',))


def test_histogram_time_observes_even_when_the_block_raises() -> None:
    histogram = Histogram('timed_seconds', 't', buckets=(1,))
    with pytest.raises(KeyError), histogram.time():
        raise KeyError('x')
    assert histogram.snapshot()[2] == 1


def test_registry_refuses_duplicate_names() -> None:
    registry = Registry()
    registry.counter('dup_total', 'd')
    with pytest.raises(ValueError, match='already registered'):
        registry.gauge('dup_total', 'd')


def test_updates_from_many_threads_are_not_lost() -> None:
    counter = Counter('threads_total', 't')
    histogram = Histogram('threads_seconds', 't', buckets=(1,))

    def work() -> None:
        for _ in range(5000):
            counter.inc()
            histogram.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value() == 40000
    assert histogram.snapshot()[2] == 40000


# --- Temporal's SDK metrics -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def test_sdk_metrics_port_is_next_to_the_health_port() -> None:
    assert sdk_metrics_port(9464) == 9465
    with pytest.raises(ConfigurationError, match='TEMPORAL_RECALL_HEALTH_PORT'):
        sdk_metrics_port(65535)


async def test_temporal_runtime_serves_sdk_metrics_on_its_own_port() -> None:
    port = free_port()
    runtime = temporal_runtime(port, host='127.0.0.1')

    def fetch() -> int:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=5) as reply:
            reply.read()
            return reply.status

    assert await asyncio.to_thread(fetch) == 200
    with pytest.raises(ConfigurationError, match='TEMPORAL_RECALL_HEALTH_PORT'):
        temporal_runtime(port, host='127.0.0.1')
    del runtime
