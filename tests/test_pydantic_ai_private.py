"""Each pydantic-ai private name this project uses, named, with what of ours needs it.

pydantic-ai 2.78 has no public way to do these. When a release moves one, this test says which and why
before anything else fails; `temporal_recall._pydantic_ai_private` is the one module that imports them.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import temporal_recall

PRIVATE = [
    (
        'pydantic_ai._run_context',
        'get_current_run_context',
        'the step write reads the run context inside the model request',
    ),
    ('pydantic_ai._conversation_marks', 'mark_stored', "ConversationStore.save after the run's own appends"),
    ('pydantic_ai.messages', '_merge_consecutive_messages', 'hashing requests as a run holds them (held_hashes)'),
    ('pydantic_ai._agent_graph', '_apply_tool_defs_to_call_parts', "stamping a stored response's tool calls"),
]


@pytest.mark.parametrize(('module', 'name', 'needed_by'), PRIVATE, ids=[name for _, name, _ in PRIVATE])
def test_the_private_name_is_where_we_take_it_from(module: str, name: str, needed_by: str) -> None:
    found = getattr(importlib.import_module(module), name, None)
    assert callable(found), (
        f'pydantic-ai no longer has {module}.{name}, which temporal_recall needs for {needed_by}: '
        'find its new home (or a public replacement) and update temporal_recall/_pydantic_ai_private.py.'
    )


def _private_imports(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'pydantic_ai':
            private_module = any(part.startswith('_') for part in (node.module or '').split('.'))
            names = [alias.name for alias in node.names if private_module or alias.name.startswith('_')]
            found.extend(f'{node.module}.{name}' for name in names)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith('pydantic_ai.') and '._' in a.name)
    return found


def test_no_other_module_imports_a_private_pydantic_ai_name() -> None:
    package = Path(temporal_recall.__file__).parent
    offenders = {
        str(path.relative_to(package)): names
        for path in package.rglob('*.py')
        if path.name != '_pydantic_ai_private.py' and (names := _private_imports(path.read_text()))
    }
    assert offenders == {}
    assert len(_private_imports((package / '_pydantic_ai_private.py').read_text())) == len(PRIVATE)
