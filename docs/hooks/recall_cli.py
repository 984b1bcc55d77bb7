"""MkDocs hook: a page per `recall` command, written at build time from the command's own help.

The pages are not in the repository, so they cannot drift from the code: a new command gets a page and a
place in the navigation (under "The recall command"), and a changed option shows on the next build. The
command is found where `recall` is installed from, pyproject's `[project.scripts]`, and its help is
rendered by cyclopts, exactly as `recall COMMAND --help` prints it (plain text, 100 columns).
"""

from __future__ import annotations

import importlib
import io
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
SECTION = 'operations/recall'
INDEX = f'{SECTION}/index.md'
COMMANDS_MARKER = '<!-- recall-commands -->'
WIDTH = 100


def _app() -> Any:
    """The cyclopts `App` behind the `recall` console script."""
    scripts = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['scripts']
    module, _, _ = scripts['recall'].partition(':')
    return importlib.import_module(module).app


def _commands(app: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's words (`('search',)`, `('bodies', 'prune')`), groups followed by their commands."""
    found: list[tuple[str, ...]] = []
    for name in app:
        if name.startswith('-'):
            continue
        words = (*prefix, name)
        found.append(words)
        found.extend(_commands(app[name], words))
    return found


def _help(app: Any, words: tuple[str, ...]) -> str:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=WIDTH, color_system=None, force_terminal=False, highlight=False)
    app.help_print(list(words), console=console)
    return '\n'.join(line.rstrip() for line in out.getvalue().strip('\n').splitlines())


def _summary(app: Any, words: tuple[str, ...]) -> str:
    """The first paragraph of the command's help, on one line."""
    command = app
    for word in words:
        command = command[word]
    text = command.help if isinstance(command.help, str) else ''
    return ' '.join(text.strip().split('\n\n')[0].split())


def _path(words: tuple[str, ...]) -> str:
    return f'{SECTION}/{"-".join(words)}.md'


def _page(app: Any, words: tuple[str, ...]) -> str:
    command = ' '.join(('recall', *words))
    return (
        f'# `{command}`\n\n'
        f'<!-- Generated at build time by docs/hooks/recall_cli.py from `{command} --help`. -->\n\n'
        f'{_summary(app, words)}\n\n'
        f'```text\n$ {command} --help\n{_help(app, words)}\n```\n\n'
        'Exit statuses, scopes and the `--format json` documents: [The recall command](index.md).\n'
    )


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Put each command's page in the navigation, under the section's index page."""
    commands = _commands(_app())

    def visit(items: list[Any]) -> bool:
        for number, item in enumerate(items):
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if value == INDEX:
                title = next(iter(item)) if isinstance(item, dict) else None
                pages: list[Any] = [INDEX] + [{' '.join(('recall', *words)): _path(words)} for words in commands]
                items[number] = {title or 'The recall command': pages}
                return True
            if isinstance(value, list) and visit(value):
                return True
        return False

    if not visit(config.nav or []):
        raise ValueError(f'mkdocs.yml nav has no {INDEX} to put the recall commands under')
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    app = _app()
    for words in _commands(app):
        files.append(File.generated(config, _path(words), content=_page(app, words)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The section's index lists every command, with the first line of its help."""
    if page.file.src_uri != INDEX:
        return markdown
    if COMMANDS_MARKER not in markdown:
        raise ValueError(f'{INDEX} lost its {COMMANDS_MARKER} marker')
    app = _app()
    rows = ['| command | what it does |', '|---|---|']
    for words in _commands(app):
        rows.append(f'| [`recall {" ".join(words)}`]({Path(_path(words)).name}) | {_summary(app, words)} |')
    return markdown.replace(COMMANDS_MARKER, '\n'.join(rows))
