"""A Temporal remote codec server, so the Web UI and `temporal workflow show` see messages, not hashes.

It speaks Temporal's remote codec protocol (`POST /decode`, `POST /encode`, JSON `Payloads`) and
decodes with `RecallDataCodec` itself, built for the scope of the caller's token: a body of another
scope, a missing one and one the codec cannot read all come back unchanged, alike. Tokens are the
HTTP API's; for the Web UI, which sends only its own login token, a cookie set at `/session` carries
it instead, honoured only on `application/json` requests so another site cannot use it through a
browser. The error codes and the UI's set-up are in docs/guides/codec.md.
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import re
import sqlite3
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from .._store_provider import StoreProvider
from ..codec import ENCODING, MissingMessageBody, RecallDataCodec, UnencodablePayload, payload_references
from ..errors import ConfigurationError, StoreError
from ._app import TokenScope, TokenValue, bearer_scope, checked_tokens

__all__ = ('CODEC_COOKIE', 'MAX_CODEC_BODY_BYTES', 'create_codec_app', 'serve_codec')

logger = logging.getLogger('temporal_recall.codec_server')

CODEC_COOKIE = 'recall-codec-token'
"""The cookie that may carry the bearer token, for the Web UI (which cannot send our token itself)."""

MAX_CODEC_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body accepted. Encoded payloads are hashes; the UI sends one event's payloads."""

_CACHE_BYTES_PER_SCOPE = 8 * 1024 * 1024
_UNDECODABLE = (MissingMessageBody, ValueError, KeyError, TypeError, RecursionError)
"""What a payload the caller sent (or a body its scope lacks) can make the codec raise."""
_UNAVAILABLE = (StoreError, ConfigurationError, sqlite3.Error, OSError)


_MAX_FORM_BYTES = 4096
_COOKIE_SAFE = re.compile(r'[A-Za-z0-9._~+/=-]{1,1024}')
"""Tokens that can travel in a cookie unquoted (`secrets.token_urlsafe` ones do)."""


def _page(message: str) -> str:
    return (
        f'<!doctype html><meta charset="utf-8"><title>temporal-recall codec server</title><p>{html.escape(message)}</p>'
    )


_SESSION_FORM = _page("Paste your token; this browser will then send it with the Temporal UI's codec requests.") + (
    '<form method="post" action="session"><input type="password" name="token" autocomplete="off" required>'
    '<button type="submit">Sign in</button></form>'
)


_BASE64_ALPHABETS = (re.compile(r'[A-Za-z0-9+/]*'), re.compile(r'[A-Za-z0-9_-]*'))


def _is_base64(text: str) -> bool:
    """Whether `text` is base64 as proto3 JSON writes bytes (standard or URL-safe, padded or not).

    protobuf's own parser skips characters outside the alphabet, so `QUJD%%%` would silently become
    other bytes than were sent; a payload must arrive exactly as the caller encoded it, or be refused.
    """
    bare = text.rstrip('=')
    padding = len(text) - len(bare)
    if padding > 2 or len(bare) % 4 == 1 or (padding and (len(bare) + padding) % 4):
        return False
    return any(alphabet.fullmatch(bare) for alphabet in _BASE64_ALPHABETS)


def _check_base64(document: dict[str, Any]) -> None:
    """Refuse, naming the payload, any `data` or metadata value that is not strict base64."""
    payloads = document.get('payloads')
    if not isinstance(payloads, list):
        return  # the parser names what is wrong with the document itself
    for index, payload in enumerate(payloads):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if not isinstance(payload, dict):
            continue
        metadata = payload.get('metadata')  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
        values: list[tuple[str, Any]] = [('data', payload.get('data'))]  # pyright: ignore[reportUnknownMemberType]
        if isinstance(metadata, dict):
            values += [(f'metadata {key!r}', value) for key, value in metadata.items()]  # pyright: ignore[reportUnknownVariableType]
        for where, value in values:
            if isinstance(value, str) and not _is_base64(value):
                raise ValueError(f'payload {index}: {where} is not base64')


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({'error': {'code': code, 'message': message}}, status_code=status, headers=headers)


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


class _CodecServer:
    """The per-scope codecs over one store, and the request handling around them."""

    def __init__(self, store: StoreProvider, tokens: list[tuple[bytes, TokenScope]], max_body_bytes: int) -> None:
        self.store = store
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.codecs: dict[str | None, RecallDataCodec] = {}

    def codec(self, scope: str | None) -> RecallDataCodec:
        codec = self.codecs.get(scope)
        if codec is None:
            codec = self.codecs[scope] = RecallDataCodec(self.store, scope=scope, cache_bytes=_CACHE_BYTES_PER_SCOPE)
        return codec

    def tenant(self, request: Request) -> TokenScope:
        authorization = request.headers.getlist('authorization')
        cookie = request.cookies.get(CODEC_COOKIE)
        if len(authorization) == 1:
            scope = bearer_scope(self.tokens, authorization[0].encode('latin-1'))
        elif not authorization and cookie:
            scope = bearer_scope(self.tokens, b'Bearer ' + cookie.encode())
            if (
                scope is not None
                and request.headers.get('content-type', '').split(';')[0].strip() != 'application/json'
            ):
                raise _Refused(
                    _error(415, 'unsupported_media_type', 'Send the payloads as `Content-Type: application/json`.')
                )
        else:
            scope = None
        if scope is None:
            raise _Refused(
                _error(
                    401,
                    'unauthorized',
                    f'Send `Authorization: Bearer <token>` (or the `{CODEC_COOKIE}` cookie) with a token this '
                    'codec server was configured with.',
                    {'WWW-Authenticate': 'Bearer'},
                )
            )
        return scope

    async def payloads(self, request: Request) -> list[Payload]:
        too_large = _error(
            413,
            'payload_too_large',
            f'The request body is larger than {self.max_body_bytes} bytes; send fewer payloads per request.',
        )
        declared = request.headers.get('content-length')
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_body_bytes):
            raise _Refused(too_large)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise _Refused(too_large)
        try:
            parsed = json.loads(bytes(body).decode('utf-8'))
            if not isinstance(parsed, dict):
                raise json_format.ParseError('the document is not a JSON object')
            _check_base64(parsed)  # pyright: ignore[reportUnknownArgumentType]
            document = json_format.ParseDict(parsed, Payloads())
        except (json_format.ParseError, ValueError, RecursionError) as error:
            raise _Refused(
                _error(
                    400,
                    'bad_request',
                    'The body must be a JSON payloads document, {"payloads": [{"metadata": {...}, "data": '
                    f'"<base64>"}}, ...]}}: {str(error)[:200]}',
                )
            ) from None
        return list(document.payloads)

    async def decode(self, scope: str | None, payloads: list[Payload]) -> list[Payload]:
        codec = self.codec(scope)
        try:
            return await codec.decode(payloads)
        except _UNDECODABLE:
            pass
        # One payload the codec cannot decode must not hide the others: decode them one by one and
        # leave the undecodable ones as they came, which is also how a missing body looks.
        decoded: list[Payload] = []
        for payload in payloads:
            try:
                decoded.extend(await codec.decode([payload]))
            except _UNDECODABLE:
                decoded.append(payload)
        return decoded

    async def decode_any_scope(self, payloads: list[Payload]) -> list[Payload]:
        """An operator token's decode: each payload by the codec of the scope that holds its bodies.

        A payload's bodies were all written by one codec, so one scope holds them all. The scopes
        holding the bodies the payloads name are looked up by hash (an index, not a read of every
        body) and tried in turn; a payload none of them decodes comes back unchanged.
        """
        store = await self.store.get()
        named: set[str] = set()
        for payload in payloads:
            with contextlib.suppress(*_UNDECODABLE):  # left as it came, like a missing body
                named |= payload_references(payload)
        scopes = await store.body_scopes(sorted(named)) if named else []  # type: ignore[attr-defined]
        decoded = list(payloads)
        for scope in scopes:
            pending = [index for index, payload in enumerate(decoded) if payload.metadata.get('encoding') == ENCODING]
            if not pending:
                break
            answered = await self.decode(scope, [decoded[index] for index in pending])
            for index, payload in zip(pending, answered, strict=True):
                decoded[index] = payload
        return decoded

    async def sign_in(self, request: Request) -> Response:
        """Set the token cookie from the sign-in form, for the Web UI's codec requests from this browser."""
        origin = request.headers.get('origin')
        if origin is not None and urlsplit(origin).netloc != request.headers.get('host'):
            return HTMLResponse(_page("Sign in from the codec server's own /session page."), status_code=403)
        body = b''
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM_BYTES:
                return HTMLResponse(_page('The form is too large.'), status_code=413)
        token = parse_qs(body.decode('utf-8', 'replace')).get('token', [''])[0].strip()
        if not _COOKIE_SAFE.fullmatch(token) or bearer_scope(self.tokens, b'Bearer ' + token.encode()) is None:
            return HTMLResponse(_page('That token is not one this codec server knows.'), status_code=401)
        secure = request.url.scheme == 'https' or request.headers.get('x-forwarded-proto') == 'https'
        response = HTMLResponse(
            _page('Signed in: the Temporal UI can now decode payloads through this codec server in this browser.')
        )
        # Cross-site (Temporal Cloud's UI) needs SameSite=None, which browsers only accept with Secure.
        response.set_cookie(
            CODEC_COOKIE, token, httponly=True, secure=secure, samesite='none' if secure else 'lax', path='/'
        )
        return response

    async def handle(self, request: Request, operation: str) -> Response:
        try:
            tenant = self.tenant(request)
            payloads = await self.payloads(request)
            if operation == 'decode':
                if tenant.operator:
                    answered = await self.decode_any_scope(payloads)
                else:
                    answered = await self.decode(tenant.scope, payloads)
            elif tenant.operator:
                return _error(
                    403, 'forbidden', 'An operator token only decodes; encode with a token mapped to the scope.'
                )
            else:
                answered = await self.codec(tenant.scope).encode(payloads)
        except UnencodablePayload as error:
            return _error(400, 'bad_payload', str(error))
        except _Refused as refused:
            return refused.response
        except _UNAVAILABLE as error:
            logger.warning('store unavailable: %s', error)
            return _error(503, 'store_unavailable', 'The conversation store is unavailable right now; retry later.')
        document: dict[str, Any] = json_format.MessageToDict(Payloads(payloads=answered))
        document.setdefault('payloads', [])
        return Response(json.dumps(document, separators=(',', ':')), media_type='application/json')


def _cors(allowed_origins: Sequence[str]) -> list[Middleware]:
    """CORS for exactly `allowed_origins`, credentials allowed (none at all without origins)."""
    for origin in allowed_origins:
        if origin == '*' or '://' not in origin or origin.endswith('/') or origin != origin.strip():
            raise ConfigurationError(
                f'Allowed origin {origin!r} must be an exact origin like "https://ui.example.com" or '
                '"http://localhost:8233" (no wildcard, path or trailing slash), since credentials are allowed.'
            )
    if not allowed_origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(allowed_origins),
            allow_methods=['POST'],
            allow_headers=['authorization', 'authorization-extras', 'content-type', 'x-namespace'],
            allow_credentials=True,
            max_age=600,
        )
    ]


async def _not_found(request: Request, error: Exception) -> Response:
    return _error(404, 'not_found', 'No such resource; the codec server answers POST /decode and POST /encode.')


async def _method_not_allowed(request: Request, error: Exception) -> Response:
    return _error(405, 'method_not_allowed', 'Use POST for /decode and /encode (GET or POST for /session).')


def create_codec_app(
    store: str | os.PathLike[str] | StoreProvider | Any,
    *,
    tokens: Mapping[str, TokenValue],
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = MAX_CODEC_BODY_BYTES,
) -> Starlette:
    """The codec server as an ASGI application, to serve alone or mount in the HTTP API app.

    Args:
        store: The store the workers' `RecallDataCodec` writes to: a URL or path (opened on first
            use; closed at shutdown when this app runs its own lifespan), a `StoreProvider`, or an
            open store, which the caller keeps and closes (use that when mounting the app under
            another one, whose lifespan does not reach a mounted app).
        tokens: Each bearer token mapped to exactly one tenant scope, as for `create_app`, or to
            `{"operator": true}`: an operator token, which decodes the bodies of every scope (and
            encodes nothing).
        allowed_origins: Origins whose browsers may call this server (the Temporal UI's, e.g.
            `https://cloud.temporal.io`), credentials included. Empty: no CORS at all.
        max_body_bytes: Larger request bodies are refused with 413 before they are parsed.

    Raises:
        ConfigurationError: No tokens, a short token, an empty scope, or an origin that is not
            `scheme://host[:port]`.
    """
    checked = checked_tokens(tokens, operators=True)
    middleware = _cors(allowed_origins)
    owned = isinstance(store, str | os.PathLike)
    provider = StoreProvider(os.fspath(store)) if owned else StoreProvider.coerce(store)  # pyright: ignore[reportArgumentType]
    server = _CodecServer(provider, checked, max_body_bytes)

    async def decode(request: Request) -> Response:
        return await server.handle(request, 'decode')

    async def encode(request: Request) -> Response:
        return await server.handle(request, 'encode')

    async def session(request: Request) -> Response:
        if request.method == 'GET':
            return HTMLResponse(_SESSION_FORM)
        return await server.sign_in(request)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            if owned:
                await provider.aclose()

    app = Starlette(
        routes=[
            Route('/decode', decode, methods=['POST']),
            Route('/encode', encode, methods=['POST']),
            Route('/session', session, methods=['GET', 'POST']),
        ],
        middleware=middleware,
        exception_handlers={404: _not_found, 405: _method_not_allowed},
        lifespan=lifespan,
    )
    app.state.codec_store = provider
    return app


async def serve_codec(
    store: str,
    *,
    tokens_file: str | os.PathLike[str],
    allowed_origins: Sequence[str] = (),
    host: str = '127.0.0.1',
    port: int = 8088,
    log_level: str = 'info',
    announce: Callable[[], None] | None = None,
) -> None:
    """Run the codec server on uvicorn until interrupted (what `recall codec-server` does).

    The tokens are read and the store is opened before serving, so a bad tokens file or a wrong URL
    fails here rather than at the first request; `announce` is called after both, before serving.
    """
    import uvicorn

    from ..store import open_store
    from ._app import load_tokens

    tokens = load_tokens(tokens_file)
    opened = await open_store(store)
    try:
        app = create_codec_app(opened, tokens=tokens, allowed_origins=allowed_origins)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan='on')
        logger.info('codec server for %d tokens, origins %s', len(tokens), ', '.join(allowed_origins) or 'none')
        if announce is not None:
            announce()
        await uvicorn.Server(config).serve()
    finally:
        await opened.close()
