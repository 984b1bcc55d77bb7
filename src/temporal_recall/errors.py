"""Every exception temporal-recall raises on purpose.

Catch `RecallError` to handle anything the product refuses; catch a leaf to handle one case::

    RecallError
    ├── StoreError                      the store cannot do what was asked
    │   ├── StoreUnavailable            the database cannot be opened or reached (retryable)
    │   ├── NotADatabase                the path or URL does not name a store
    │   │   └── NoStore                 nothing is there, and the caller asked not to create a store
    │   ├── SchemaTooNew                written by a newer temporal-recall; nothing was touched
    │   ├── StoreReadOnly               the database refuses writes
    │   ├── UnknownConversation         no such conversation in the caller's scope
    │   ├── UnknownEntry                no such entry in the store
    │   ├── MessageNotSerializable      a message cannot be stored as JSON
    │   └── HistoryMismatch             a delta does not attach to what the store holds
    ├── SearchError                     a search request is unusable
    │   ├── InvalidQuery                empty, too large, or holding control characters
    │   └── InvalidSearchParameters     k1, b, limits or scope out of range
    ├── InvalidIdentifier               an id too long, or holding control characters or invalid text
    ├── ConfigurationError              settings that cannot work (names the setting)
    ├── EmbeddingUnavailable            the embedding model failed or cannot be reached (retryable)
    ├── EmbeddingMismatch               the store's vectors came from another embedding model
    └── PayloadTooLarge                 a value would not fit in one Temporal payload

`pydantic_ai.conversation_store.ConversationConflict` is raised unchanged for revision conflicts, so
code written against pydantic-ai's `ConversationStore` keeps working. Scope violations are reported
as `UnknownConversation`, exactly like a conversation that does not exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by `retryable` and `non_retryable` alone: `recall` and the store raise without it
    from temporalio.exceptions import ApplicationError

__all__ = (
    'ConfigurationError',
    'EmbeddingMismatch',
    'EmbeddingUnavailable',
    'HistoryMismatch',
    'InvalidIdentifier',
    'InvalidQuery',
    'InvalidSearchParameters',
    'MessageNotSerializable',
    'NoStore',
    'NotADatabase',
    'PayloadTooLarge',
    'PruneRefused',
    'RecallError',
    'SchemaTooNew',
    'SearchError',
    'StoreError',
    'StoreReadOnly',
    'StoreUnavailable',
    'UnknownConversation',
    'UnknownEntry',
    'counted',
    'non_retryable',
    'retryable',
)


SHOWN_CHARACTERS = 40
"""How much of a value an error message quotes: enough to recognise it, never all of a long one."""


def shown(value: str) -> str:
    """`value` quoted for an error message: at most `SHOWN_CHARACTERS` of it, plus its length if cut."""
    if len(value) <= SHOWN_CHARACTERS:
        return repr(value)
    return f'{value[:SHOWN_CHARACTERS]!r}… ({len(value):,} characters)'


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, plural unless the count is one: `1 conversation`, `3 entries`, `0 problems`."""
    return f'{count} {noun if count == 1 else plural or noun + "s"}'


class RecallError(Exception):
    """Base class of every error temporal-recall raises on purpose."""


class StoreError(RecallError):
    """The store cannot do what was asked."""


class StoreUnavailable(StoreError):
    """The database cannot be opened or reached right now; retrying later may succeed."""


class NotADatabase(StoreError):
    """The path or URL does not name a temporal-recall store."""


class NoStore(NotADatabase):
    """No store exists at the path or URL (no file, or an empty PostgreSQL schema), and the caller
    opened it with `create=False`, as every command that only reads does; nothing was created."""

    def __init__(self, where: str) -> None:
        self.where = where
        """Where the store was looked for: "at <path>", or "in the PostgreSQL schema ... at <url>"."""
        super().__init__(f'No store {where}; nothing was created.')


class SchemaTooNew(StoreError):
    """The database was written by a newer temporal-recall; it was left untouched."""


class StoreReadOnly(StoreError):
    """The database refuses writes (file permissions or a read-only mount)."""


class UnknownConversation(StoreError):
    """No conversation with this id exists in the caller's scope.

    Deliberately the same for "does not exist" and "belongs to another scope", so a caller cannot
    probe for other tenants' conversation ids.
    """

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(f'Conversation {shown(conversation_id)} is not in the store.')


class UnknownEntry(StoreError, LookupError):
    """No entry with this id exists in the store.

    Also a `LookupError`, which is what pydantic-ai's `ConversationStore` catches when a concurrent
    delete released an entry it was reading.
    """

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f'Entry {shown(entry_id)} is not in the store.')


class MessageNotSerializable(StoreError):
    """A message could not be serialized with pydantic-ai's message type adapter."""


class HistoryMismatch(StoreError):
    """A delta names a point in the conversation that the store does not hold.

    The writer should resend the whole history (`base_length=0`), letting the store work out
    what it lacks.
    """


class SearchError(RecallError):
    """A search request is unusable as given."""


class InvalidQuery(SearchError):
    """The query is empty, whitespace only, larger than the documented bound, or not printable text."""


class InvalidSearchParameters(SearchError):
    """A ranking or paging parameter is out of range."""


class InvalidIdentifier(RecallError):
    """A conversation id, run id, scope or entry id that cannot be an id, refused before any store sees it.

    Longer than `MAX_ID_LENGTH` (512) characters, holding a control character such as NUL, or not
    valid text (a lone surrogate, which is what undecodable bytes become). The message quotes at
    most the first 40 characters of the value.
    """


class ConfigurationError(RecallError):
    """A setting has a value that cannot work; the message names the setting."""


class PruneRefused(ConfigurationError):
    """A body prune window shorter than the stated history retention plus the margin; nothing was deleted."""


class EmbeddingUnavailable(RecallError):
    """The embedding model failed (a provider error, a model that cannot load): Temporal retries the activity,
    and nothing of the failed attempt's vectors was written."""


class EmbeddingMismatch(RecallError):
    """The store's vectors were made by another embedding model (or dimension) than the one configured;
    vectors are never mixed: re-embed with `recall reindex --embeddings` or configure the store's model."""

    @classmethod
    def between(cls, stored: tuple[str, int], model: str, dimensions: int | None = None) -> EmbeddingMismatch:
        """The error for a store whose vectors are `stored` (`(model, dimensions)`), asked to use `model`."""
        held = f'{stored[0]!r} ({stored[1]} dimensions)'
        asked = repr(model) if dimensions is None else f'{model!r} ({dimensions} dimensions)'
        return cls(
            f"The store's vectors were made by {held}, not by the configured embedder {asked}; vectors of two "
            f'models are never compared. Configure {stored[0]!r} again, or re-embed the store with the new '
            f'model: `recall reindex --embeddings --embedder {model}`.'
        )


class PayloadTooLarge(RecallError):
    """A value would exceed Temporal's payload size limit, so retrying cannot help."""


def retryable(error: RecallError) -> ApplicationError:
    """`error` as a Temporal failure that is retried, with the store's (or embedding model's) own message.

    Raise it `from None`: the server keeps an activity's last failure only up to a few KB, and the full
    chain through the database driver would show as "Failure exceeds size limit" instead of the message.
    """
    from temporalio.exceptions import ApplicationError

    return ApplicationError(str(error), type=type(error).__name__)


def non_retryable(error: RecallError) -> ApplicationError:
    """`error` as a Temporal failure that is not retried, named by its class (the failure's `type`).

    For refusals that no retry can change (bad input, another scope's conversation): raised as is,
    a `RecallError` would be retried by Temporal, forever in workflow code.
    """
    from temporalio.exceptions import ApplicationError

    return ApplicationError(str(error), type=type(error).__name__, non_retryable=True)
