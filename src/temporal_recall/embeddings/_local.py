"""The offline embedding model of the `semantic` extra: wordllama's bundled `l2_supercat` static embeddings.

wordllama's loader looks for its tokenizer where its wheel does not put it and then downloads it, so
this model loads from a folder of links to the packaged weights and tokenizer, downloads disabled: it
never touches the network, and a broken install fails at once. It loads on the first `embed`, in
activity code; building it is free, so a module-level agent can hold it in the workflow sandbox.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from importlib import util
from pathlib import Path
from typing import Any, cast

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.usage import RequestUsage

from ..errors import ConfigurationError

__all__ = ('LOCAL_MODEL', 'WordLlamaEmbeddingModel')

LOCAL_MODEL = 'wordllama:l2_supercat_256'
"""The name the local model answers to wherever an embedder is named (`ConversationRecall(embedder=...)`,
`TEMPORAL_RECALL_EMBEDDER`, `recall reindex --embeddings --embedder`)."""

_CONFIG, _DIMENSIONS = 'l2_supercat', 256
_FILES = {
    'weights': f'{_CONFIG}_{_DIMENSIONS}.safetensors',
    'tokenizers': f'{_CONFIG}_tokenizer_config.json',
}

_loaded: Any = None
_loading = threading.Lock()


def _package_folder() -> Path:
    spec = util.find_spec('wordllama')
    if spec is None or spec.origin is None:
        raise ConfigurationError(
            f'The embedding model {LOCAL_MODEL!r} needs wordllama: install temporal-recall with the semantic extra, '
            '`pip install "temporal-recall[semantic]"`, or configure another embedder.'
        )
    return Path(spec.origin).parent


def _load() -> Any:
    """The wordllama model, loaded once per process from the files its wheel ships (never downloaded)."""
    global _loaded
    with _loading:
        if _loaded is None:
            package = _package_folder()
            # The layout lives only while loading: the model reads its files into memory, and a folder
            # left for `atexit` would outlive the processes that leave through `os._exit`.
            with tempfile.TemporaryDirectory(prefix='temporal-recall-wordllama-') as folder_name:
                cache = Path(folder_name)
                for folder, name in _FILES.items():
                    packaged = package / folder / name
                    if not packaged.is_file():
                        raise ConfigurationError(
                            f'The wordllama install has no {folder}/{name}: reinstall wordllama 0.4 '
                            '(`pip install --force-reinstall "temporal-recall[semantic]"`).'
                        )
                    (cache / folder).mkdir()
                    (cache / folder / name).symlink_to(packaged)
                from wordllama import WordLlama  # pyright: ignore[reportMissingImports]

                _loaded = WordLlama.load(config=_CONFIG, dim=_DIMENSIONS, cache_dir=cache, disable_download=True)
    return _loaded


class WordLlamaEmbeddingModel(EmbeddingModel):
    """wordllama's `l2_supercat` (256 dimensions) as a pydantic-ai `EmbeddingModel`, offline (see the module doc).

    Queries and documents are embedded alike (a static model has no instruction prefixes); vectors are unit length.
    """

    def __init__(self, *, settings: EmbeddingSettings | None = None) -> None:
        super().__init__(settings=settings)

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL.split(':', 1)[1]

    @property
    def system(self) -> str:
        return 'wordllama'

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        # A float32 array: its rows are the sequences of floats a result holds, without a copy per number.
        vectors = _load().embed(texts, norm=True) if texts else []
        return EmbeddingResult(
            embeddings=cast('Sequence[Sequence[float]]', vectors),
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
            usage=RequestUsage(),
        )

    async def max_input_tokens(self) -> int | None:
        return None

    def check_installed(self) -> None:
        """Refuse at once, without loading the weights, where wordllama is not installed.

        Raises:
            ConfigurationError: wordllama is missing; the message says how to install it.
        """
        _package_folder()
