"""Process metrics for the worker's `/metrics` endpoint, using nothing beyond the standard library.

Four product metrics do not justify a dependency: the Prometheus text format (version 0.0.4) is a
few lines of `# HELP`, `# TYPE` and samples, rendered here by `render()` and served by
`temporal_recall.worker._health.HealthServer`.

Metrics are per process. Each worker replica exposes its own values and Prometheus aggregates
across replicas (`sum(rate(temporal_recall_step_writes_total[5m]))`).

Update metrics from activities and worker code only, never from workflow code: a workflow is
replayed from its history, so an increment there would count the same step once per replay, and
Temporal's sandbox re-imports modules per workflow run, so it would not even reach this registry.

Temporal's own SDK metrics (task slots, poll latency, activity failures, ...) live in the Rust core.
`temporal_runtime()` serves them from the SDK's own Prometheus endpoint on the health port + 1; see
its docstring for why they are not merged into our `/metrics`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, ClassVar, TypeVar

from .errors import ConfigurationError

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

__all__ = (
    'CONTENT_TYPE',
    'INDEX_DOCUMENTS',
    'MESSAGES_STORED',
    'REGISTRY',
    'SDK_METRICS_PORT_OFFSET',
    'SEARCH_SECONDS',
    'STEP_WRITES',
    'Counter',
    'Gauge',
    'Histogram',
    'Registry',
    'render',
    'sdk_metrics_port',
    'temporal_runtime',
)

CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
"""The `Content-Type` of `render()`'s output, as Prometheus expects for the text format."""

SDK_METRICS_PORT_OFFSET = 1
"""Temporal's SDK metrics are served on `TEMPORAL_RECALL_HEALTH_PORT + SDK_METRICS_PORT_OFFSET`."""

_METRIC_NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*\Z')
_LABEL_NAME = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*\Z')

_LabelValues = tuple[str, ...]
_Sample = tuple[str, tuple[tuple[str, str], ...], float]
"""(sample name, label pairs, value) — one line of exposition output."""


def _format_value(value: float) -> str:
    if math.isnan(value):
        return 'NaN'
    if math.isinf(value):
        return '+Inf' if value > 0 else '-Inf'
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape_label_value(value: str) -> str:
    return value.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _escape_help(text: str) -> str:
    return text.replace('\\', '\\\\').replace('\n', '\\n')


def _format_labels(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ''
    return '{' + ','.join(f'{name}="{_escape_label_value(value)}"' for name, value in pairs) + '}'


class _Metric:
    """What every metric kind shares: a validated name, help text, a fixed label set and a lock.

    The lock is a plain `threading.Lock`: activities may run in a thread pool while the health
    server renders on the event loop, and every critical section is a few arithmetic operations.
    """

    kind: ClassVar[str]
    _reserved_labels: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> None:
        if not _METRIC_NAME.match(name):
            raise ValueError(
                f'Metric name {name!r} is invalid; use letters, digits, "_" and ":", not starting with a digit.'
            )
        for label in labelnames:
            if not _LABEL_NAME.match(label) or label.startswith('__'):
                raise ValueError(
                    f'Label name {label!r} of {name} is invalid; use letters, digits and "_" (no "__" prefix).'
                )
            if label in self._reserved_labels:
                raise ValueError(f'Label name {label!r} is reserved by {self.kind} metrics; pick another for {name}.')
        if len(set(labelnames)) != len(labelnames):
            raise ValueError(f'Metric {name} lists a label name twice: {list(labelnames)}.')
        self.name = name
        self.documentation = documentation
        self.labelnames: tuple[str, ...] = tuple(labelnames)
        self._lock = threading.Lock()

    def _key(self, labels: Mapping[str, str]) -> _LabelValues:
        if len(labels) != len(self.labelnames) or any(name not in labels for name in self.labelnames):
            expected = ', '.join(self.labelnames) or 'no labels'
            raise ValueError(f'{self.name} takes {expected}; got {", ".join(sorted(labels)) or "no labels"}.')
        return tuple(str(labels[name]) for name in self.labelnames)

    def _pairs(self, key: _LabelValues) -> tuple[tuple[str, str], ...]:
        return tuple(zip(self.labelnames, key, strict=True))

    def _samples(self) -> list[_Sample]:
        raise NotImplementedError

    def render(self) -> str:
        """This metric's `# HELP`, `# TYPE` and sample lines, newline-terminated."""
        lines = [f'# HELP {self.name} {_escape_help(self.documentation)}', f'# TYPE {self.name} {self.kind}']
        lines.extend(f'{name}{_format_labels(pairs)} {_format_value(value)}' for name, pairs, value in self._samples())
        return '\n'.join(lines) + '\n'


class _ValueMetric(_Metric):
    """A single number per label set: the storage behind `Counter` and `Gauge`."""

    def __init__(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, labelnames=labelnames)
        # An unlabelled metric is exported as 0 from the start, so a rate() has a first point.
        self._values: dict[_LabelValues, float] = {} if self.labelnames else {(): 0.0}

    def _add(self, amount: float, labels: Mapping[str, str]) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """The current value for `labels` (0 if never touched)."""
        key = self._key(labels)
        with self._lock:
            return self._values.get(key, 0.0)

    def _samples(self) -> list[_Sample]:
        with self._lock:
            items = sorted(self._values.items())
        return [(self.name, self._pairs(key), value) for key, value in items]


class Counter(_ValueMetric):
    """A count that only goes up (it resets to 0 when the process restarts; Prometheus handles that)."""

    kind = 'counter'

    def inc(self, amount: float = 1, **labels: str) -> None:
        if amount < 0 or math.isnan(amount):
            raise ValueError(f'{self.name} is a counter and can only increase; got {amount}. Use a Gauge to go down.')
        self._add(amount, labels)


class Gauge(_ValueMetric):
    """A value that can go up and down, such as a size last measured."""

    kind = 'gauge'

    def set(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)

    def inc(self, amount: float = 1, **labels: str) -> None:
        self._add(amount, labels)

    def dec(self, amount: float = 1, **labels: str) -> None:
        self._add(-amount, labels)


class _HistogramState:
    __slots__ = ('count', 'counts', 'sum')

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets  # per bucket, not cumulative; the last one is +Inf
        self.sum = 0.0
        self.count = 0


class Histogram(_Metric):
    """Observations counted into fixed buckets, plus their sum and count.

    Buckets are fixed at construction so that every replica exports the same `le` series and
    Prometheus can aggregate them with `histogram_quantile`.
    """

    kind = 'histogram'
    _reserved_labels = frozenset({'le'})

    def __init__(
        self, name: str, documentation: str, *, buckets: Sequence[float], labelnames: Sequence[str] = ()
    ) -> None:
        super().__init__(name, documentation, labelnames=labelnames)
        bounds = [float(bound) for bound in buckets if not math.isinf(bound)]
        if not bounds or any(math.isnan(bound) for bound in bounds):
            raise ValueError(f'{name} needs at least one finite bucket bound; got {list(buckets)}.')
        if any(low >= high for low, high in itertools.pairwise(bounds)):
            raise ValueError(f'Bucket bounds of {name} must be strictly increasing; got {list(buckets)}.')
        self.buckets: tuple[float, ...] = tuple(bounds)
        self._states: dict[_LabelValues, _HistogramState] = {}
        if not self.labelnames:
            self._states[()] = _HistogramState(len(self.buckets) + 1)

    def observe(self, value: float, **labels: str) -> None:
        if math.isnan(value):
            raise ValueError(f'{self.name} cannot observe NaN.')
        key = self._key(labels)
        index = bisect.bisect_left(self.buckets, value)  # first bound >= value, i.e. `le` semantics
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = _HistogramState(len(self.buckets) + 1)
            state.counts[index] += 1
            state.sum += value
            state.count += 1

    @contextmanager
    def time(self, **labels: str) -> Generator[None]:
        """Observe the wall-clock seconds the `with` block took (also when it raises)."""
        self._key(labels)  # fail before the work, not after it
        start = time.perf_counter()
        try:
            yield
        finally:
            self.observe(time.perf_counter() - start, **labels)

    def snapshot(self, **labels: str) -> tuple[list[int], float, int]:
        """(cumulative bucket counts ending with +Inf, sum, count) for `labels`."""
        key = self._key(labels)
        with self._lock:
            state = self._states.get(key)
            if state is None:
                return [0] * (len(self.buckets) + 1), 0.0, 0
            counts, total, count = list(state.counts), state.sum, state.count
        cumulative: list[int] = []
        running = 0
        for bucket in counts:
            running += bucket
            cumulative.append(running)
        return cumulative, total, count

    def _samples(self) -> list[_Sample]:
        with self._lock:
            states = sorted((key, list(s.counts), s.sum, s.count) for key, s in self._states.items())
        samples: list[_Sample] = []
        bounds = [repr(bound) for bound in self.buckets] + ['+Inf']
        for key, counts, total, count in states:
            pairs = self._pairs(key)
            running = 0
            for bound, bucket in zip(bounds, counts, strict=True):
                running += bucket
                samples.append((f'{self.name}_bucket', (*pairs, ('le', bound)), running))
            samples.append((f'{self.name}_sum', pairs, total))
            samples.append((f'{self.name}_count', pairs, count))
        return samples


_M = TypeVar('_M', bound=_Metric)


class Registry:
    """An ordered set of metrics rendered together; names are unique within it."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()

    def register(self, metric: _M) -> _M:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f'A metric named {metric.name} is already registered; reuse it instead.')
            self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> Counter:
        return self.register(Counter(name, documentation, labelnames=labelnames))

    def gauge(self, name: str, documentation: str, *, labelnames: Sequence[str] = ()) -> Gauge:
        return self.register(Gauge(name, documentation, labelnames=labelnames))

    def histogram(
        self, name: str, documentation: str, *, buckets: Sequence[float], labelnames: Sequence[str] = ()
    ) -> Histogram:
        return self.register(Histogram(name, documentation, buckets=buckets, labelnames=labelnames))

    def names(self) -> list[str]:
        with self._lock:
            return list(self._metrics)

    def render(self) -> str:
        """Every metric in Prometheus text format 0.0.4."""
        with self._lock:
            metrics = list(self._metrics.values())
        return ''.join(metric.render() for metric in metrics)


REGISTRY = Registry()
"""The process-wide registry that the worker's `/metrics` serves."""

SEARCH_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""From 1 ms (a cached SQLite posting read) to 10 s (a large PostgreSQL scan under load)."""

STEP_WRITES = REGISTRY.counter(
    'temporal_recall_step_writes_total',
    'Step-boundary persistence writes executed by this worker, including retries that found nothing new.',
)
MESSAGES_STORED = REGISTRY.counter(
    'temporal_recall_messages_stored_total',
    'Messages newly written to the store; a message the store already held (replay, retry) is not counted.',
)
SEARCH_SECONDS = REGISTRY.histogram(
    'temporal_recall_search_seconds',
    'Wall-clock seconds to answer one recall search, including the store read.',
    buckets=SEARCH_BUCKETS,
)
INDEX_DOCUMENTS = REGISTRY.gauge(
    'temporal_recall_index_documents',
    'Documents in the search index, as last counted by this process.',
)


def render() -> str:
    """The process registry in Prometheus text format (serve it with `CONTENT_TYPE`)."""
    return REGISTRY.render()


def sdk_metrics_port(health_port: int) -> int:
    """Where Temporal's SDK metrics are served for a given health port."""
    port = health_port + SDK_METRICS_PORT_OFFSET
    if not 0 < port < 65536:
        raise ConfigurationError(
            f'TEMPORAL_RECALL_HEALTH_PORT={health_port} leaves no room for the Temporal SDK metrics port '
            f'(health port + {SDK_METRICS_PORT_OFFSET}); pick a health port below 65535.'
        )
    return port


def temporal_runtime(port: int, *, host: str = '0.0.0.0') -> Runtime:
    """A Temporal `Runtime` that serves the SDK's own metrics at `http://host:port/metrics`.

    Pass it to `Client.connect(..., runtime=...)`; every worker built on that client reports into
    it. Use `sdk_metrics_port(settings.health_port)` for `port`, so the SDK endpoint sits next to
    ours at health port + 1.

    Why a second endpoint instead of merging into `/metrics`: the SDK can also hand metrics to
    Python through a `MetricBuffer`, but that buffer must be drained on a timer and every update
    re-aggregated into counters, gauges and histograms with the core's bucket layout — more code
    than this product's own metrics, to reproduce what the core's Prometheus exporter already does.
    """
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    try:
        return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f'{host}:{port}')))
    except Exception as error:
        raise ConfigurationError(
            f'Cannot serve Temporal SDK metrics on {host}:{port} ({error}). Free that port, or move '
            f'TEMPORAL_RECALL_HEALTH_PORT: the SDK endpoint always uses the health port + {SDK_METRICS_PORT_OFFSET}.'
        ) from error
