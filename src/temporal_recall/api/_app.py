"""The HTTP search API: search, list and read a tenant's conversations over the store.

Each bearer token maps to exactly one tenant scope, and a conversation of another scope answers
exactly like one that does not exist, so a token holder cannot probe for other tenants' ids. A
guard refuses a request without a known token, or with too large a body, from its headers before
FastAPI parses anything. The error codes are documented in docs/operations/http-api.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import sqlite3
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Protocol, cast

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParameter
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai.embeddings import Embedder
from pydantic_ai.messages import ModelMessagesTypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._cursor import MAX_CURSOR_LENGTH
from .._store_provider import StoreProvider
from .._validation import MAX_ID_LENGTH, Identifier, QueryText
from ..embeddings import EmbedderSource, as_embedder
from ..errors import (
    ConfigurationError,
    EmbeddingMismatch,
    EmbeddingUnavailable,
    InvalidIdentifier,
    InvalidQuery,
    InvalidSearchParameters,
    StoreError,
    UnknownConversation,
    shown,
)
from ..query import ConversationInfo, QueryStore, list_conversation_page, read_conversation, search_messages
from ..search import MAX_LIMIT, Role, SearchHit, SearchMode

__all__ = ('API_PREFIX', 'MAX_BODY_BYTES', 'MIN_TOKEN_LENGTH', 'ApiStore', 'create_app', 'load_tokens')

logger = logging.getLogger('temporal_recall.api')

API_PREFIX = '/api/v1'
MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted; a search request is a few hundred bytes."""
MIN_TOKEN_LENGTH = 16
"""Shorter tokens are refused at startup: they could be guessed."""

_TENANT = 'temporal_recall.tenant'
"""Where the guard leaves the authenticated scope in the ASGI scope for the endpoints."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ApiStore(QueryStore, Protocol):
    """What the API reads (through `temporal_recall.query`), and closes at shutdown."""

    async def close(self) -> None: ...


# --- request and response bodies -------------------------------------------------------------------


class SearchBody(BaseModel):
    """A search in one conversation of the token's scope, or in all of them without `conversation_id`."""

    model_config = ConfigDict(extra='forbid', frozen=True)

    conversation_id: Identifier | None = Field(
        default=None,
        min_length=1,
        json_schema_extra={'maxLength': MAX_ID_LENGTH},
        description="The conversation to search; omitted or null: every conversation of the token's scope.",
    )
    query: QueryText = Field(description='Words to look for; must not be empty.')
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT, strict=True, description='Most hits to return (1-100).')
    run_id: Identifier | None = Field(
        default=None, json_schema_extra={'maxLength': MAX_ID_LENGTH}, description='Only messages of this agent run.'
    )
    role: Role | None = Field(
        default=None, description='Only what this speaker said: user, assistant, tool (results) or system.'
    )
    include_superseded: bool = Field(
        default=False,
        strict=True,
        description='Also search what was superseded inside one agent run (an answer a retried model request '
        'replaced); by default everything else a conversation stored is searched, on every branch it left.',
    )
    include_branches: bool | None = Field(
        default=None,
        strict=True,
        json_schema_extra={'deprecated': True},
        description='The old name of include_superseded (answered with a Deprecation header).',
    )
    mode: SearchMode | None = Field(
        default=None,
        description='bm25 (the words), semantic (the meaning) or hybrid (both); omitted: hybrid where the API '
        "has an embedder, else bm25. Meaning without one uses the model of the store's vectors, and answers "
        '400 where the store has none or that model cannot be used.',
    )


class SearchResponse(BaseModel):
    """The hits, best first: the same objects as `recall search --format json`. May be empty."""

    hits: list[SearchHit]


class ConversationSummary(BaseModel):
    conversation_id: str
    scope: str | None
    updated_at: datetime
    head_id: str | None
    branches: int
    """How many branches the conversation has left (histories kept after a rewrite)."""
    forked_from: str | None
    title: str | None = None
    """What the conversation is about, as `ConversationStore.update` set it."""
    metadata: dict[str, Any] | None = None
    """The application's own metadata, as `ConversationStore.update` set it."""


class ConversationList(BaseModel):
    conversations: list[ConversationSummary]
    """Newest first."""
    next_cursor: str | None = Field(
        description='Pass it as `after` for the next page; null when no conversation comes after this page. '
        'It stays good while conversations are written: the next page holds exactly those after this one.'
    )


class TranscriptMessage(BaseModel):
    position: int
    entry_id: str
    role: str
    text: str
    """The message's searchable text (prompts, replies, tool calls and returns)."""
    message: dict[str, Any]
    """The message as pydantic-ai serializes it (`ModelMessagesTypeAdapter`)."""


class ConversationDetail(BaseModel):
    conversation: ConversationSummary
    messages: list[TranscriptMessage]
    """The current branch, oldest first."""


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))
    return JSONResponse(body.model_dump(), status_code=status, headers=dict(headers or {}))


_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {'model': ErrorBody, 'description': 'Malformed body, missing or invalid fields or ids, or an empty query.'},
    401: {'model': ErrorBody, 'description': 'No bearer token, or an unknown one.'},
    404: {'model': ErrorBody, 'description': "No such conversation in the token's scope."},
    413: {'model': ErrorBody, 'description': 'Request body over 64 KiB.'},
    503: {'model': ErrorBody, 'description': 'The store (or the embedding model) cannot be reached; retry later.'},
}


# --- tokens ------------------------------------------------------------------------------------------


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


OPERATOR = {'operator': True}
"""A token's value in the tokens file that makes it an operator token: `{"<token>": {"operator": true}}`.

An operator token may decode bodies of every scope in the codec server (`recall codec-server`), which
is what an operator who opens the Temporal UI needs. It reads nothing else: the HTTP search API
(`recall serve`) does not accept it, and the codec server's /encode refuses it (which scope would
the bodies belong to?)."""

TokenValue = str | None | Mapping[str, bool]
"""A scope, `None` (the conversations stored without a scope), or `OPERATOR`."""


@dataclass(frozen=True)
class TokenScope:
    """The one tenant a bearer token reads: `scope` `None` is the conversations stored without a scope
    (a token mapped to JSON `null`), a tenant of its own like any other. An operator token
    (`operator`) has no scope: the codec server decodes every scope's bodies for it."""

    scope: str | None
    operator: bool = False


def checked_tokens(tokens: Mapping[str, TokenValue], *, operators: bool = False) -> list[tuple[bytes, TokenScope]]:
    """Each token's digest and what it reads; operator tokens are kept only with `operators` (the codec server)."""
    if not tokens:
        raise ConfigurationError('No API tokens are configured; map at least one token to a scope.')
    checked: list[tuple[bytes, TokenScope]] = []
    for token, scope in tokens.items():
        if scope == OPERATOR and isinstance(token, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            _check_token_text(token)
            if operators:
                checked.append((_digest(token.encode()), TokenScope(None, operator=True)))
            continue
        if not isinstance(token, str) or not isinstance(scope, str | None):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError(
                'API tokens must be strings, and scopes strings, null (stored without a scope) or '
                '{"operator": true} (decodes every scope, in the codec server only): {"token": "scope", ...}.'
            )
        _check_token_text(token)
        if scope == '':
            raise ConfigurationError(
                'An API token maps to an empty scope; map every token to its tenant scope '
                '(null for the conversations stored without one).'
            )
        checked.append((_digest(token.encode()), TokenScope(scope)))
    if not checked:
        raise ConfigurationError(
            'The tokens file holds only operator tokens, which decode in the codec server only; '
            'map a token to a scope to serve the search API.'
        )
    return checked


def _check_token_text(token: str) -> None:
    if len(token) < MIN_TOKEN_LENGTH or token != token.strip() or any(c.isspace() for c in token):
        raise ConfigurationError(
            f'An API token is shorter than {MIN_TOKEN_LENGTH} characters or contains whitespace; '
            'use long random tokens, e.g. `python -c "import secrets; print(secrets.token_urlsafe(32))"`.'
        )


def bearer_scope(tokens: Sequence[tuple[bytes, TokenScope]], authorization: bytes) -> TokenScope | None:
    """The tenant of the token in an `Authorization: Bearer <token>` value, or None if it is unknown.

    `tokens` are the digests and scopes `checked_tokens` returns.
    """
    scheme, _, credential = authorization.strip().partition(b' ')
    credential = credential.strip()
    if scheme.lower() != b'bearer' or not credential:
        return None
    offered = _digest(credential)
    found: TokenScope | None = None
    for digest, tenant in tokens:  # every token, every time: no early exit to time
        if hmac.compare_digest(digest, offered):
            found = tenant
    return found


def load_tokens(path: str | os.PathLike[str]) -> dict[str, TokenValue]:
    """Read a tokens file: a JSON object mapping each bearer token to the one scope it may read
    (`null`: the conversations stored without a scope), or to `{"operator": true}` (`OPERATOR`).

    Raises:
        ConfigurationError: The file is missing or unreadable, is not a JSON object of strings, or
            holds a short or empty token or an empty scope.
    """
    try:
        text = Path(path).read_text(encoding='utf-8')
    except OSError as error:
        raise ConfigurationError(f'Cannot read the tokens file {path}: {error.strerror or error}.') from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigurationError(
            f'The tokens file {path} is not valid JSON ({error.msg} at line {error.lineno}); '
            'write an object like {"<token>": "<scope>"}.'
        ) from error
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and (isinstance(v, str | None) or v == OPERATOR)
        for k, v in data.items()  # pyright: ignore[reportUnknownVariableType]
    ):
        raise ConfigurationError(
            f'The tokens file {path} must hold one JSON object mapping each token to its scope, '
            'like {"<token>": "<scope>"} (null for no scope, {"operator": true} for an operator token).'
        )
    tokens: dict[str, TokenValue] = dict(data)  # pyright: ignore[reportUnknownArgumentType]
    checked_tokens(tokens, operators=True)
    return tokens


# --- the guard: authentication and body size, before FastAPI parses anything -----------------------


async def _send_error(
    send: Send, status: int, code: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps({'error': {'code': code, 'message': message}}, separators=(',', ':')).encode()
    await send(
        {
            'type': 'http.response.start',
            'status': status,
            'headers': [
                (b'content-type', b'application/json'),
                (b'content-length', str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({'type': 'http.response.body', 'body': body})


class _Guard:
    """ASGI middleware: a token for every `/api/` request, and bodies of at most `max_body_bytes`."""

    def __init__(self, app: ASGIApp, *, tokens: list[tuple[bytes, TokenScope]], max_body_bytes: int) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes

    def _tenant(self, headers: Sequence[tuple[bytes, bytes]]) -> TokenScope | None:
        values = [value for name, value in headers if name.lower() == b'authorization']
        if len(values) != 1:
            return None
        return bearer_scope(self.tokens, values[0])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http' or not str(scope['path']).startswith(API_PREFIX + '/'):
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get('headers') or [])
        tenant = self._tenant(headers)
        if tenant is None:
            await _send_error(
                send,
                401,
                'unauthorized',
                'Send `Authorization: Bearer <token>` with a token this server was configured with.',
                [(b'www-authenticate', b'Bearer')],
            )
            return
        too_large = f'The request body is larger than {self.max_body_bytes} bytes; search requests are small.'
        declared = [value for name, value in headers if name.lower() == b'content-length']
        if declared and (not declared[0].strip().isdigit() or int(declared[0]) > self.max_body_bytes):
            await _send_error(send, 413, 'payload_too_large', too_large)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message['type'] == 'http.disconnect':
                return
            chunk: bytes = message.get('body', b'')
            size += len(chunk)
            if size > self.max_body_bytes:
                await _send_error(send, 413, 'payload_too_large', too_large)
                return
            chunks.append(chunk)
            if not message.get('more_body', False):
                break
        body = b''.join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {'type': 'http.request', 'body': body, 'more_body': False}
            return await receive()

        scope[_TENANT] = tenant
        await self.app(scope, replay, send)


# --- the application ---------------------------------------------------------------------------------


def _summary(info: ConversationInfo) -> ConversationSummary:
    return ConversationSummary.model_validate(info, from_attributes=True)


def _validation_message(error: RequestValidationError) -> str:
    problems: list[str] = []
    for item in error.errors()[:5]:
        where = list(item.get('loc', ()))
        if where and where[0] in ('body', 'query', 'path', 'header'):
            where = where[1:] or where  # `body` alone names the body; otherwise name the field
        problems.append(f'{".".join(str(part) for part in where) or "body"}: {item.get("msg", "invalid")}')
    return 'The request is invalid: ' + '; '.join(problems) + '.'


def _not_found(conversation_id: str) -> JSONResponse:
    # The same body whether the conversation does not exist or belongs to another scope.
    return _error(404, 'not_found', f'No conversation {shown(conversation_id)} in this scope.')


def _unavailable(error: BaseException) -> JSONResponse:
    logger.warning('store unavailable: %s', error)
    return _error(503, 'store_unavailable', 'The conversation store is unavailable right now; retry later.')


def _install_error_handlers(app: FastAPI) -> None:
    async def http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        codes = {404: 'not_found', 405: 'method_not_allowed', 400: 'bad_request'}
        return _error(
            error.status_code,
            codes.get(error.status_code, 'http_error'),
            str(error.detail) if error.status_code != 404 else 'No such resource.',
            error.headers,
        )

    async def invalid_request(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return _error(400, 'bad_request', _validation_message(error))

    async def invalid_id(request: Request, error: Exception) -> JSONResponse:
        return _error(400, 'invalid_id', str(error))

    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        # The traceback goes to the server log (Starlette re-raises after answering); the client
        # gets JSON that reveals nothing of it.
        return _error(500, 'internal_error', 'The server failed to answer this request; the details are in its log.')

    async def invalid_query(request: Request, error: Exception) -> JSONResponse:
        return _error(400, 'invalid_query', str(error))

    async def invalid_parameters(request: Request, error: Exception) -> JSONResponse:
        return _error(400, 'invalid_parameters', str(error))

    async def unknown_conversation(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, UnknownConversation)
        return _not_found(error.conversation_id)

    async def unavailable(request: Request, error: Exception) -> JSONResponse:
        return _unavailable(error)

    async def embedder_unavailable(request: Request, error: Exception) -> JSONResponse:
        # The operator's to fix (the provider, or the configured model): logged, not told to the client.
        logger.warning('embedder unavailable: %s', error)
        return _error(503, 'embedder_unavailable', 'Search by meaning is unavailable right now; retry later.')

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(InvalidIdentifier, invalid_id)
    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(InvalidQuery, invalid_query)
    app.add_exception_handler(InvalidSearchParameters, invalid_parameters)
    app.add_exception_handler(UnknownConversation, unknown_conversation)
    for kind in (StoreError, ConfigurationError, sqlite3.Error, OSError):
        app.add_exception_handler(kind, unavailable)
    for kind in (EmbeddingUnavailable, EmbeddingMismatch):
        app.add_exception_handler(kind, embedder_unavailable)


def _without_unused_responses(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document without FastAPI's 422 responses: validation errors answer 400 here."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for path in document.get('paths', {}).values():
                for operation in path.values():
                    operation.get('responses', {}).pop('422', None)
            schemas = document.get('components', {}).get('schemas', {})
            for name in ('HTTPValidationError', 'ValidationError'):
                schemas.pop(name, None)
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


_bearer = HTTPBearer(auto_error=False, description="A token from the server's tokens file; it names one scope.")


def _tenant(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str | None:
    """The scope the guard authenticated (`_credentials` is only there to document the scheme)."""
    tenant = request.scope.get(_TENANT)
    if not isinstance(tenant, TokenScope):
        raise StarletteHTTPException(401, 'Send `Authorization: Bearer <token>`.', {'WWW-Authenticate': 'Bearer'})
    return tenant.scope


Tenant = Annotated[str | None, Depends(_tenant)]


async def _opened_store(request: Request) -> ApiStore:
    provider: StoreProvider = request.app.state.recall_store
    return cast(ApiStore, await provider.get())


Store = Annotated[ApiStore, Depends(_opened_store)]


async def _embedder(request: Request) -> Embedder | None:
    embedder: Embedder | None = request.app.state.recall_embedder
    return embedder


Meaning = Annotated[Embedder | None, Depends(_embedder)]

_routes = APIRouter()
"""The API's routes; `create_app` adds them to an app that holds the store, the embedder and the guard."""


@_routes.post(
    f'{API_PREFIX}/conversations/search',
    response_model=SearchResponse,
    responses=_ERROR_RESPONSES,
    summary="Search one conversation, or every conversation of the token's scope",
    operation_id='search_conversation',
)
async def search(
    body: SearchBody, tenant: Tenant, store: Store, meaning: Meaning, response: Response
) -> SearchResponse:
    renamed = body.model_fields_set & {'include_branches'}
    if renamed:
        response.headers['Deprecation'] = 'true'
        response.headers['Warning'] = '299 - "include_branches is renamed include_superseded"'
    result = await search_messages(
        store,
        body.query,
        conversation_id=body.conversation_id,
        scope=tenant,
        run_id=body.run_id,
        role=body.role,
        limit=body.limit,
        include_superseded=body.include_superseded or bool(renamed and body.include_branches),
        mode=body.mode,
        embedder=meaning,
    )
    return SearchResponse(hits=result.hits)


@_routes.get(
    f'{API_PREFIX}/conversations',
    response_model=ConversationList,
    responses={code: _ERROR_RESPONSES[code] for code in (400, 401, 503)},
    summary="List the token's conversations, newest first, a page at a time",
    operation_id='list_conversations',
)
async def conversations(
    tenant: Tenant,
    store: Store,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description='Most conversations per page (1-100).')] = 20,
    after: Annotated[
        str | None,
        Query(
            json_schema_extra={'maxLength': MAX_CURSOR_LENGTH},
            description='The `next_cursor` of the previous page: list the conversations after it.',
        ),
    ] = None,
) -> ConversationList:
    page = await list_conversation_page(store, scope=tenant, limit=limit, after=after)
    return ConversationList(conversations=[_summary(info) for info in page.conversations], next_cursor=page.next_cursor)


@_routes.get(
    f'{API_PREFIX}/conversations/{{conversation_id}}',
    response_model=ConversationDetail,
    responses={code: _ERROR_RESPONSES[code] for code in (400, 401, 404, 503)},
    summary='A conversation and the transcript of its current branch',
    operation_id='get_conversation',
)
async def conversation(
    conversation_id: Annotated[Identifier, PathParameter(json_schema_extra={'maxLength': MAX_ID_LENGTH})],
    tenant: Tenant,
    store: Store,
) -> ConversationDetail:
    transcript = await read_conversation(store, conversation_id, scope=tenant)
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(
        [message.message for message in transcript.messages], mode='json'
    )
    messages = [
        TranscriptMessage(position=m.position, entry_id=m.entry_id, role=m.role, text=m.text, message=data)
        for m, data in zip(transcript.messages, dumped, strict=True)
    ]
    return ConversationDetail(conversation=_summary(transcript.conversation), messages=messages)


def create_app(
    store: str | os.PathLike[str] | ApiStore,
    *,
    tokens: Mapping[str, TokenValue],
    max_body_bytes: int = MAX_BODY_BYTES,
    embedder: EmbedderSource | None = None,
) -> FastAPI:
    """The search API over `store`, for the bearer tokens in `tokens` (token -> the one scope it reads).

    Args:
        store: A store URL or path, opened on first use and closed at shutdown (an unreachable
            store answers 503 and is retried on the next request), or an open store, which the
            caller keeps and closes.
        tokens: Each bearer token mapped to exactly one tenant scope; at least one, each token at
            least `MIN_TOKEN_LENGTH` characters. Operator tokens (`OPERATOR`) are not accepted here:
            they answer 401, as an unknown token.
        max_body_bytes: Larger request bodies are refused with 413 before they are parsed.
        embedder: The embedding model the store's vectors came from (an `Embedder`, an `EmbeddingModel`
            or a name): searches may then ask for `mode` semantic or hybrid (the default then). Without
            it (nor one the open store was given), a search asking for meaning embeds its query with the
            model the store's vectors were made with, built by name; the default mode is then bm25.

    Raises:
        ConfigurationError: No tokens, or a short token or an empty scope.
    """
    checked = checked_tokens(tokens)
    provider = StoreProvider(store)
    meaning = as_embedder(embedder)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            await provider.aclose()

    app = FastAPI(
        title='temporal-recall search API',
        version='1',
        description='Search and read the conversations of one tenant scope. Every `/api/v1` request needs '
        '`Authorization: Bearer <token>`; the token decides the scope.',
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.recall_store = provider
    app.state.recall_embedder = meaning
    app.openapi = _without_unused_responses(app)
    _install_error_handlers(app)
    app.add_middleware(_Guard, tokens=checked, max_body_bytes=max_body_bytes)

    app.include_router(_routes)
    return app
