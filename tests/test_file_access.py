"""No code of the package opens a file outside SQLite except the few reviewed here.

Closing any descriptor of a SQLite database file drops every POSIX lock the process's connections hold
on it, and another process may then delete a write-ahead log that still holds commits (README, "One
SQLite file, many stores and processes"). So every call that could open, copy, move or delete a file
is listed with the reason it can never touch a store's files; a new one fails this test until it is
reviewed and listed, or goes through SQLite.
"""

from __future__ import annotations

import ast
from pathlib import Path

import temporal_recall

PACKAGE = Path(temporal_recall.__file__).parent

FILE_METHODS = {'read_bytes', 'read_text', 'write_bytes', 'write_text', 'touch', 'unlink'}
"""`Path` methods that open, create or remove a file, called or handed on (`to_thread(path.write_text, ...)`)."""

MODULE_FUNCTIONS = {
    'os': {'open', 'remove', 'unlink', 'rename', 'replace', 'truncate'},
    'io': {'open'},
    'shutil': {'copy', 'copy2', 'copyfile', 'copyfileobj', 'copytree', 'move', 'rmtree'},
}

REVIEWED = {
    ('api/_app.py', 'read_text'): 'the tokens file, read at startup before any store is opened',
    ('cli/__init__.py', 'write_text'): "export-history's --output file; that command opens no store",
    ('cli/__init__.py', 'os.open'): 'os.devnull, to silence a closed stdout',
    ('demo/_run.py', 'shutil.rmtree'): "the demo's own folder, removed before the demo opens its store",
}


def _file_calls(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FILE_METHODS:
            found.add(node.attr)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == 'open':
            found.add('open')
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner in MODULE_FUNCTIONS and func.attr in MODULE_FUNCTIONS[owner]:
                found.add(f'{owner}.{func.attr}')
            elif func.attr == 'open' and any(isinstance(arg, ast.Constant) for arg in node.args):
                found.add('Path.open')  # `path.open('rb')`: a mode argument, unlike a store's `open(url)`
    return found


def test_every_file_access_outside_sqlite_is_reviewed() -> None:
    calls = {
        (path.relative_to(PACKAGE).as_posix(), call)
        for path in PACKAGE.rglob('*.py')
        for call in _file_calls(ast.parse(path.read_text(encoding='utf-8')))
    }
    assert calls == set(REVIEWED), (
        f'Unreviewed file access: {sorted(calls - set(REVIEWED))}; no longer present: {sorted(set(REVIEWED) - calls)}'
    )


def test_the_check_finds_the_header_read_that_lost_commits() -> None:
    old_opener = "def check_file(path):\n    with path.open('rb') as file:\n        return file.read(16)\n"
    assert _file_calls(ast.parse(old_opener)) == {'Path.open'}
