"""The HTTP search API (`recall serve`): an ASGI application on FastAPI.

Needs the `api` extra: `pip install "temporal-recall[api]"`. Build the application with
`create_app(store_url_or_store, tokens={"<token>": "<scope>"})` and serve it with any ASGI server;
`recall serve --tokens tokens.json` runs it on uvicorn. Endpoints, authentication and status codes
are described in `temporal_recall.api._app` and in the OpenAPI document at `/openapi.json`.

`create_codec_app` (`recall codec-server`) is Temporal's remote codec protocol over the same tokens,
for the Web UI and `temporal workflow show --codec-endpoint`; see `temporal_recall.api._codec_server`.
"""

from __future__ import annotations

try:
    from ._app import API_PREFIX, MAX_BODY_BYTES, MIN_TOKEN_LENGTH, ApiStore, create_app, load_tokens
    from ._codec_server import CODEC_COOKIE, MAX_CODEC_BODY_BYTES, create_codec_app, serve_codec
except ModuleNotFoundError as error:  # pragma: no cover - depends on the installed extras
    if error.name not in ('fastapi', 'starlette'):
        raise
    raise ModuleNotFoundError(
        'The HTTP API needs FastAPI, which is not installed. Install the extra: pip install "temporal-recall[api]".',
        name=error.name,
    ) from error

__all__ = (
    'API_PREFIX',
    'CODEC_COOKIE',
    'MAX_BODY_BYTES',
    'MAX_CODEC_BODY_BYTES',
    'MIN_TOKEN_LENGTH',
    'ApiStore',
    'create_app',
    'create_codec_app',
    'load_tokens',
    'serve_codec',
)
