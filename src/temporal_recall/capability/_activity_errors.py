"""Carry the step write's failures across the activity boundary: retried, or failed for good.

The step write runs inside pydantic-ai's model-request activity, where Temporal retries whatever
is raised. So inside an activity a `RecallError` that another attempt would meet again fails the
activity for good; an outage of the store or of the embedding model is retried, with its own
message and without the driver's chain; and an attempt a later one superseded is refused, since
Temporal has already discarded it. Outside an activity (a plain `agent.run`) errors pass as they
are. A `HistoryMismatch` is no failure: the step is left to the workflow side.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import NoReturn

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..errors import EmbeddingUnavailable, HistoryMismatch, RecallError, StoreUnavailable, non_retryable, retryable

__all__ = ('failing_for_good', 'raise_retryable', 'superseded_attempt')


@contextmanager
def failing_for_good() -> Generator[None]:
    """Inside an activity, let a `RecallError` that another attempt would meet again (another scope's
    conversation, an unserializable message, a run without a conversation id) fail the activity for
    good; a mismatch, an outage and every error outside an activity pass as they are. Around a whole
    model request, so every step's hashing and writing is covered, whichever path it takes."""
    try:
        yield
    except (HistoryMismatch, StoreUnavailable, EmbeddingUnavailable):
        raise
    except RecallError as error:
        if not activity.in_activity():
            raise
        raise non_retryable(error) from None


def raise_retryable(error: StoreUnavailable | EmbeddingUnavailable) -> NoReturn:
    """Fail the activity so Temporal retries it, with the store's (or embedding model's) own message (`retryable`)."""
    if not activity.in_activity():
        raise error
    raise retryable(error) from None


def superseded_attempt(attempt: int, unit: str) -> ApplicationError:
    """The failure of an attempt whose write the store fenced off: a later attempt of `unit` already wrote."""
    return ApplicationError(
        f'Attempt {attempt} of {unit} was superseded by a later attempt, which already wrote '
        'to the conversation; this attempt stores nothing.',
        type='SupersededAttempt',
    )
