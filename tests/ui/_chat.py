"""A chat app behind pydantic-ai's UI adapters, and clients that hold their history as the real ones do.

The app is the README's endpoint: the tenant comes from the request (a header standing in for the
app's authentication), never from the client's messages or the model. Each client rebuilds the
assistant's messages from the event stream, as the Vercel AI SDK's `useChat` and the AG-UI client
do, and sends either its whole history or only its new message.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from fastapi import FastAPI, Request, Response
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationStore
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

from temporal_recall import RecallDeps

Mode = Literal['full', 'last']
"""What a client sends each turn: its whole history, or only its new message."""

TENANT_HEADER = 'x-tenant'


def chat_app(agent: Agent[RecallDeps, str], store: ConversationStore | None) -> FastAPI:
    """`/vercel` and `/agui`; with `store`, the history is held on the server (the adapters load and save it)."""
    app = FastAPI()

    def tenant(request: Request) -> str:
        return request.headers[TENANT_HEADER]  # the app's authentication, in a real one

    @app.post('/vercel')
    async def vercel(request: Request) -> Response:  # pyright: ignore[reportUnusedFunction]
        scope = tenant(request)
        return await VercelAIAdapter.dispatch_request(
            request, agent=agent, deps=RecallDeps(scope=scope), conversation_store=store, conversation_scope=scope
        )

    @app.post('/agui')
    async def agui(request: Request) -> Response:  # pyright: ignore[reportUnusedFunction]
        scope = tenant(request)
        return await AGUIAdapter.dispatch_request(
            request, agent=agent, deps=RecallDeps(scope=scope), conversation_store=store, conversation_scope=scope
        )

    return app


def asgi_client(app: FastAPI) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url='http://chat.test')


def _events(body: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for line in body.splitlines():
        if line.startswith('data: ') and line != 'data: [DONE]':
            events.append(json.loads(line.removeprefix('data: ')))
    return events


@dataclass
class Turn:
    """What the user saw of one turn."""

    status: int
    text: str = ''
    tool_outputs: dict[str, str] = field(default_factory=dict[str, str])
    error: str | None = None
    saved_entry_ids: list[str] = field(default_factory=list[str])


@dataclass
class Chat:
    """One browser tab: a conversation id, a tenant, and the messages the client keeps."""

    http: httpx2.AsyncClient
    chat_id: str
    tenant: str
    mode: Mode = 'full'
    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    async def send(self, text: str, *, message_id: str | None = None) -> Turn:
        user = self._user(text)
        if message_id is not None:
            user['id'] = message_id
        self.messages.append(user)
        response = await self.http.post(
            self.path,
            json=self._body(self.messages if self.mode == 'full' else [user]),
            headers={TENANT_HEADER: self.tenant},
        )
        if response.status_code != 200:
            return Turn(status=response.status_code)
        turn = Turn(status=200)
        self.messages.extend(self._apply(_events(response.text), turn))
        return turn

    async def edit_last(self, text: str) -> Turn:
        """Resubmit the last user message, edited (same message id, as the clients do), dropping what followed it."""
        last_user = max(i for i, m in enumerate(self.messages) if m['role'] == 'user')
        message_id = self.messages[last_user]['id']
        del self.messages[last_user:]
        return await self.send(text, message_id=message_id)

    def drop_last_turn(self) -> None:
        """Drop the last user message and what followed it, to send an edited one instead."""
        last_user = max(i for i, m in enumerate(self.messages) if m['role'] == 'user')
        del self.messages[last_user:]

    path: str = ''

    def _user(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def _apply(self, events: list[dict[str, Any]], turn: Turn) -> list[dict[str, Any]]:
        raise NotImplementedError


@dataclass
class VercelChat(Chat):
    """The Vercel AI SDK's `useChat`: UI messages with parts, rebuilt from the UI message stream."""

    path: str = '/vercel'

    def _user(self, text: str) -> dict[str, Any]:
        return {'id': uuid.uuid4().hex, 'role': 'user', 'parts': [{'type': 'text', 'text': text}]}

    def _body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {'trigger': 'submit-message', 'id': self.chat_id, 'messages': messages}

    def _apply(self, events: list[dict[str, Any]], turn: Turn) -> list[dict[str, Any]]:
        message: dict[str, Any] = {'id': uuid.uuid4().hex, 'role': 'assistant', 'parts': []}
        texts: dict[str, dict[str, Any]] = {}
        tools: dict[str, dict[str, Any]] = {}
        for event in events:
            kind = event['type']
            if kind == 'start':
                message['id'] = event.get('messageId') or message['id']
                if 'messageMetadata' in event:
                    message['metadata'] = event['messageMetadata']
            elif kind in ('message-metadata', 'finish') and 'messageMetadata' in event:
                message['metadata'] = {**(message.get('metadata') or {}), **event['messageMetadata']}
            elif kind == 'start-step':
                message['parts'].append({'type': 'step-start'})
            elif kind == 'text-start':
                texts[event['id']] = {'type': 'text', 'text': '', 'state': 'streaming'}
                if 'providerMetadata' in event:
                    texts[event['id']]['providerMetadata'] = event['providerMetadata']
                message['parts'].append(texts[event['id']])
            elif kind == 'text-delta':
                texts[event['id']]['text'] += event['delta']
            elif kind == 'text-end':
                texts[event['id']]['state'] = 'done'
                turn.text += texts[event['id']]['text']
            elif kind in ('tool-input-start', 'tool-input-available'):
                part = tools.get(event['toolCallId'])
                if part is None:
                    part = tools[event['toolCallId']] = {
                        'type': f'tool-{event["toolName"]}',
                        'toolCallId': event['toolCallId'],
                    }
                    message['parts'].append(part)
                part['state'] = 'input-available' if kind == 'tool-input-available' else 'input-streaming'
                part['input'] = event.get('input')
                if 'providerMetadata' in event:
                    part['callProviderMetadata'] = event['providerMetadata']
            elif kind == 'tool-output-available':
                part = tools[event['toolCallId']]
                part['state'], part['output'] = 'output-available', event['output']
                turn.tool_outputs[part['type'].removeprefix('tool-')] = str(event['output'])
            elif kind == 'error':
                turn.error = event['errorText']
            elif kind == 'data-conversation-saved':
                turn.saved_entry_ids = event['data']['entry_ids']
        return [message] if message['parts'] else []


@dataclass
class AGUIChat(Chat):
    """An AG-UI client: assistant messages with tool calls and tool messages, rebuilt from the events."""

    path: str = '/agui'

    def _user(self, text: str) -> dict[str, Any]:
        return {'id': str(uuid.uuid4()), 'role': 'user', 'content': text}

    def _body(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            'threadId': self.chat_id,
            'runId': str(uuid.uuid4()),
            'state': None,
            'messages': messages,
            'tools': [],
            'context': [],
            'forwardedProps': None,
        }

    def _apply(self, events: list[dict[str, Any]], turn: Turn) -> list[dict[str, Any]]:
        added: list[dict[str, Any]] = []
        by_id: dict[str, dict[str, Any]] = {}
        calls: dict[str, dict[str, Any]] = {}
        names: dict[str, str] = {}
        for event in events:
            kind = event['type']
            if kind == 'TEXT_MESSAGE_START':
                by_id[event['messageId']] = {'id': event['messageId'], 'role': 'assistant', 'content': ''}
                added.append(by_id[event['messageId']])
            elif kind == 'TEXT_MESSAGE_CONTENT':
                by_id[event['messageId']]['content'] += event['delta']
                turn.text += event['delta']
            elif kind == 'TOOL_CALL_START':
                parent = event.get('parentMessageId')
                message = (
                    added[-1] if added and added[-1]['id'] == parent and added[-1]['role'] == 'assistant' else None
                )
                if message is None:
                    message = {'id': parent or event['toolCallId'], 'role': 'assistant'}
                    added.append(message)
                call = {
                    'id': event['toolCallId'],
                    'type': 'function',
                    'function': {'name': event['toolCallName'], 'arguments': ''},
                }
                message.setdefault('toolCalls', []).append(call)
                calls[event['toolCallId']] = call
                names[event['toolCallId']] = event['toolCallName']
            elif kind == 'TOOL_CALL_ARGS':
                calls[event['toolCallId']]['function']['arguments'] += event['delta']
            elif kind == 'TOOL_CALL_RESULT':
                added.append(
                    {
                        'id': event['messageId'],
                        'role': 'tool',
                        'content': event['content'],
                        'toolCallId': event['toolCallId'],
                    }
                )
                turn.tool_outputs[names[event['toolCallId']]] = event['content']
            elif kind == 'RUN_ERROR':
                turn.error = event['message']
            elif kind == 'CUSTOM' and event['name'] == 'pydantic_ai_conversation_saved':
                turn.saved_entry_ids = event['value']['entry_ids']
        return added


CLIENTS: dict[str, type[Chat]] = {'vercel': VercelChat, 'agui': AGUIChat}
