"""`ConversationStore.save` after the run's own `ConversationRecall` appends: no conflict, nothing stored twice.

An agent carrying `ConversationRecall` on the same store writes each step while it runs, so by the
time pydantic-ai's cycle (load → run → `save(result)`, what the UI adapters do with
`conversation_store=`) saves the result, the store already holds the run's messages under a newer
revision. `own_appends` (`_lineage`) tells whether only this run's appends made that revision; if
so, the save compares the conversation with the stored history by content hash, as a run holds
them (requests no response separates as one, `_pending`), from where the conversation starts in
it, and writes only what is missing (usually nothing but the record: usage,
deferred tool requests, a new revision). The write is checked against the revision just read, so a
change landing in between still conflicts. Any other difference of revision is left to pydantic-ai's
own `save`, which raises `ConversationConflict`.

pydantic-ai has no public way for a store to mark a conversation saved: its own `save` calls
`mark_stored` and `AgentRunResult._conversation_saved`, and so does this one, so the result carries
the new revision into the next run exactly as after pydantic-ai's save.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord, ConversationStore
from pydantic_ai.messages import ModelMessage
from pydantic_ai.run import AgentRunResult

from temporal_recall._pydantic_ai_private import mark_stored
from temporal_recall.content import held_hashes

from ._lineage import own_appends

__all__ = ('save_after_own_appends',)


async def save_after_own_appends(
    store: ConversationStore, saving: Conversation | AgentRunResult[Any], *, scope: str | None
) -> list[ConversationEntry] | None:
    """Save `saving` if only its own run changed the stored conversation since it was loaded; else `None`.

    Returns the entries holding the conversation's unsaved messages (from `new_message_index` on,
    or from the run's first message without one), stored by this save or already by the run's
    appends, so a UI adapter can tell its client their ids either way.
    """
    result = saving if isinstance(saving, AgentRunResult) else None
    conversation = saving.conversation if isinstance(saving, AgentRunResult) else saving
    messages = list(conversation.messages)
    # A result knows its run; a conversation is the run's whose response it ends with.
    run_id = result.run_id if result is not None else (messages[-1].run_id if messages else None)
    record = await store.read_record(conversation.conversation_id)
    if record is None or record.revision == conversation.revision or (scope is not None and record.scope != scope):
        return None
    held = own_appends(record.revision, conversation.revision, run_id)
    index = conversation.new_message_index
    if held is None or (index is not None and held < index):
        return None
    history = await store.read_history(record.head_id) or []
    # Compared as a run holds them: the requests a failed model call left stored, and the request of
    # the next run that merged them, are one message (`_pending`).
    stored = _held([entry.message for entry in history])
    ran = _held(messages)
    aligned = _aligned(stored, ran, held, index)
    if aligned is None:
        return None
    offset, shared = aligned
    kept = stored[offset + shared - 1][2] if offset + shared else 0
    parent_id = history[kept - 1].id if kept else None
    branches = list(record.branches)
    if kept < len(history):
        # The run's history differs from what its appends left stored: keep that as a branch.
        branches = [*(tip for tip in branches if tip != history[-1].id), history[-1].id]
    new_entries: list[ConversationEntry] = []
    for message in messages[ran[shared][1] if shared < len(ran) else len(messages) :]:
        new_entries.append(ConversationEntry(parent_id=parent_id, message=message))
        parent_id = new_entries[-1].id
    updated = ConversationRecord(
        conversation_id=record.conversation_id,
        head_id=parent_id,
        usage=conversation.usage,
        deferred_tool_requests=conversation.deferred_tool_requests,
        scope=scope if scope is not None else record.scope,
        forked_from=record.forked_from,
        forked_at=record.forked_at,
        branches=branches,
    )
    await store.write_record(updated, new_entries=new_entries, expected_revision=record.revision)
    conversation.revision = updated.revision
    mark_stored(conversation, messages)
    if result is not None:
        result._conversation_saved(updated.revision)
    # The unsaved messages: from `new_message_index` on; without one, from the run's first message.
    first = index if index is not None else next((i for i, m in enumerate(messages) if m.run_id == run_id), 0)
    unsaved = next((n for n, (_, _, end) in enumerate(ran) if end > first), len(ran))
    start = stored[offset + unsaved][1] if unsaved < shared else kept
    return [*history[start:kept], *new_entries]


Held = tuple[str, int, int]
"""A message as a run holds it: its content hash, and where it starts and ends among the stored ones."""


def _aligned(stored: list[Held], ran: list[Held], held: int, index: int | None) -> tuple[int, int] | None:
    """Where the run's messages begin among the stored ones (`offset`), and how many of them, from there,
    the store holds (`shared`), counted as a run holds them; `None` when the run counts more of its
    messages as stored than the store holds."""
    if index is None:
        offset = 0
    else:
        # A conversation that says how many of its messages were stored ends with those. A request the
        # run continued is not one of them: its run merged it into the run's own first request.
        offset = _count_within(stored, held) - _count_within(ran, index)
        if offset < 0:
            return None
    shared = 0
    for (stored_hash, _, _), (run_hash, _, _) in zip(stored[offset:], ran, strict=False):
        if stored_hash != run_hash:
            break
        shared += 1
    return offset, shared


def _held(messages: list[ModelMessage]) -> list[Held]:
    held: list[Held] = []
    start = 0
    for digest, count in held_hashes(messages):
        held.append((digest, start, start + count))
        start += count
    return held


def _count_within(held: list[Held], length: int) -> int:
    """How many of `held` lie wholly within the first `length` messages."""
    return sum(1 for _, _, end in held if end <= length)
