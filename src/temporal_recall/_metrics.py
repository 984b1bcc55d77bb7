"""temporal-recall's metrics, recorded through the Temporal SDK's meter.

Inside an activity, `activity.metric_meter()` is the worker's Temporal runtime meter with the
activity's namespace, task queue and activity type as labels, so recall's metrics appear beside
the SDK's own on whatever exporter the runtime has (`prometheus_runtime` below serves them over
HTTP). Outside an activity (a plain `agent.run`, the CLI, the HTTP API) nothing is recorded.

Record from activity code only, never from workflow code: a workflow replays from its history, so
a count there would repeat once per replay.

    temporal_recall_step_writes         counter    step-boundary writes, including retries that stored nothing
    temporal_recall_messages_stored     counter    messages newly written (a message already held is not counted)
    temporal_recall_search_latency      histogram  time to answer one search, store read included
                                                   (milliseconds, or seconds with `durations_as_seconds`)
    temporal_recall_search_hits         histogram  hits returned by one search
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from temporalio.common import MetricMeter
    from temporalio.runtime import Runtime

__all__ = ('HISTOGRAM_BUCKETS', 'prometheus_runtime', 'record_search', 'record_step_write')

STEP_WRITES = 'temporal_recall_step_writes'
MESSAGES_STORED = 'temporal_recall_messages_stored'
SEARCH_LATENCY = 'temporal_recall_search_latency'
SEARCH_HITS = 'temporal_recall_search_hits'

HISTOGRAM_BUCKETS: dict[str, list[float]] = {
    # From a cached SQLite posting read to a large PostgreSQL scan under load, in milliseconds.
    SEARCH_LATENCY: [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000],
    SEARCH_HITS: [0, 1, 2, 4, 8, 16, 32, 64, 100],
}
"""Bucket bounds for recall's histograms; `prometheus_runtime` applies them."""


def _meter() -> MetricMeter | None:
    # An activity runs only in a process that imported `temporalio.activity` (a worker's): without it
    # (`recall`, the HTTP API) nothing can be recorded, and the SDK, its Rust runtime included, stays unloaded.
    if 'temporalio.activity' not in sys.modules:
        return None
    from temporalio import activity

    return activity.metric_meter() if activity.in_activity() else None


def record_step_write(stored: int) -> None:
    """One step-boundary write finished; `stored` messages of it were new to the store."""
    meter = _meter()
    if meter is None:
        return
    meter.create_counter(STEP_WRITES, 'Step-boundary persistence writes, including retries that stored nothing.').add(1)
    meter.create_counter(MESSAGES_STORED, 'Messages newly written to the store.').add(stored)


def record_search(seconds: float, hits: int) -> None:
    """One search was answered in `seconds` with `hits` hits."""
    meter = _meter()
    if meter is None:
        return
    meter.create_histogram_timedelta(SEARCH_LATENCY, 'Time to answer one recall search.').record(
        timedelta(seconds=seconds)
    )
    meter.create_histogram(SEARCH_HITS, 'Hits returned by one recall search.').record(hits)


def prometheus_runtime(bind_address: str) -> Runtime:
    """A Temporal `Runtime` serving the SDK's metrics and recall's at `http://{bind_address}/metrics`.

    Pass it to `Client.connect(..., runtime=...)`; every worker on that client reports into it.
    """
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    buckets = {name: list(bounds) for name, bounds in HISTOGRAM_BUCKETS.items()}
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=bind_address, histogram_bucket_overrides=buckets)
        )
    )
