"""The fenced Python blocks of README.md and docs/, with the attributes their fences carry.

A block's fence may carry attributes in braces, which MkDocs (attr_list) and GitHub both ignore when
they render it:

- `{test="skip" reason="..."}`: the block only illustrates; the test skips it, reporting the reason.
- `{test="pytest"}`: the block is a test file; it runs under pytest, with the page's pytest
  configuration (the page's TOML block whose first line is `# pyproject.toml`).
- `{group="NAME"}`: the blocks of one page with this group run together, in their order, as one program.
- `{prints="TEXT"}`: the program's output must hold TEXT.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = frozenset({'python', 'py'})
_OPENING = re.compile(r'^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<language>[\w+-]*)[ \t]*(?P<rest>.*)$')
_ATTRIBUTE = re.compile(r'([\w-]+)="([^"]*)"')
KNOWN = frozenset({'test', 'reason', 'group', 'prints', 'title'})


@dataclass(frozen=True, kw_only=True)
class Block:
    """One fenced block of a page, dedented to its fence."""

    page: str
    """The page's path from the repository root, e.g. `docs/guides/codec.md`."""
    line: int
    """The line of its opening fence, from 1."""
    language: str
    source: str
    attributes: dict[str, str] = field(default_factory=dict[str, str])

    @property
    def where(self) -> str:
        return f'{self.page}:{self.line}'


def pages() -> list[Path]:
    """README.md and every Markdown page of docs/, in a stable order."""
    return [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the page at `path`, whatever its language."""
    found: list[Block] = []
    lines = path.read_text(encoding='utf-8').splitlines()
    page = path.relative_to(ROOT).as_posix()
    number = 0
    while number < len(lines):
        opening = _OPENING.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, fence = opening['indent'], opening['fence']
        body: list[str] = []
        end = number + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and lines[end].strip().strip(fence[0]) == ''
        ):
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end].lstrip())
            end += 1
        if end == len(lines):
            raise ValueError(f'{page}:{number + 1}: a fence that is never closed')
        attributes = dict(_ATTRIBUTE.findall(opening['rest']))
        found.append(
            Block(
                page=page,
                line=number + 1,
                language=opening['language'].lower(),
                source='\n'.join(body) + '\n',
                attributes=attributes,
            )
        )
        number = end + 1
    return found


def python_blocks() -> list[Block]:
    return [block for path in pages() for block in blocks(path) if block.language in PYTHON]


@dataclass(frozen=True, kw_only=True)
class Example:
    """What one test runs: a block, or a group's blocks of one page joined in order."""

    blocks: tuple[Block, ...]

    @property
    def first(self) -> Block:
        return self.blocks[0]

    @property
    def id(self) -> str:
        group = self.first.attributes.get('group')
        return f'{self.first.page}:{group}' if group else self.first.where

    @property
    def source(self) -> str:
        return '\n'.join(block.source for block in self.blocks)

    @property
    def skip_reason(self) -> str | None:
        return self.first.attributes.get('reason') if self.first.attributes.get('test') == 'skip' else None

    @property
    def prints(self) -> list[str]:
        return [block.attributes['prints'] for block in self.blocks if 'prints' in block.attributes]


def examples() -> list[Example]:
    """Each block on its own, except a page's group, which is one example at its first block's place."""
    order: list[Block | tuple[str, str]] = []
    groups: dict[tuple[str, str], list[Block]] = {}
    for block in python_blocks():
        group = block.attributes.get('group')
        if group is None:
            order.append(block)
            continue
        if (block.page, group) not in groups:
            groups[block.page, group] = []
            order.append((block.page, group))
        groups[block.page, group].append(block)
    return [
        Example(blocks=(item,)) if isinstance(item, Block) else Example(blocks=tuple(groups[item])) for item in order
    ]


def pytest_config(page: str) -> str | None:
    """The page's pytest configuration: its TOML block that starts with `# pyproject.toml`."""
    for block in blocks(ROOT / page):
        if block.language == 'toml' and block.source.startswith('# pyproject.toml'):
            return block.source
    return None
