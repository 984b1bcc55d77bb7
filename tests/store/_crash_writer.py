"""Saves whole groups of messages in a loop until it is killed; `test_crash.py` runs and SIGKILLs it.

The first argument is anything `open_store` accepts: a SQLite path or a postgresql:// URL.

Each save writes GROUP messages tagged `save <n> part <j>`, alternating between `ConversationStore.save`
and `append`, over a few conversations, and prints the number of completed saves after each one.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime

from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation

from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest, open_store

GROUP = 4
CONVERSATIONS = 5
FILLER = ' '.join(f'word{index}' for index in range(120))
AT = datetime(2025, 1, 1, tzinfo=UTC)


def group(n: int) -> list[m.ModelMessage]:
    messages: list[m.ModelMessage] = []
    for part in range(GROUP):
        text = f'save {n} part {part} {FILLER} unique{n}x{part}'
        if part % 2:
            messages.append(m.ModelResponse(parts=[m.TextPart(text)], timestamp=AT))
        else:
            messages.append(m.ModelRequest(parts=[m.UserPromptPart(text, timestamp=AT)], timestamp=AT))
    return messages


async def main(location: str, start: int) -> None:
    async with await open_store(location) as store:
        n = start
        while True:
            conversation_id = f'c{n % CONVERSATIONS}'
            loaded = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
            if n % 2:
                loaded.messages.extend(group(n))
                await store.save(loaded)
            else:
                history = loaded.messages
                await store.append(
                    AppendRequest(
                        conversation_id=conversation_id,
                        scope=None,
                        idempotency_key=f'save-{n}',
                        base_length=len(history),
                        base_hash=content_hash(history[-1]) if history else None,
                        messages=group(n),
                    )
                )
            n += 1
            print(n, flush=True)


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
