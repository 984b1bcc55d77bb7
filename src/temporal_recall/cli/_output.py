"""What `recall` prints: documents in four formats, rich tables, and progress for long jobs.

Tables and progress bars are drawn by rich, sized to the terminal. Piped or redirected, rich draws
no bar, so a job reports plain lines instead: at most one a second, and a last one when it is done.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import yaml
    from rich.progress import ProgressColumn
    from rich.table import Table

__all__ = ('Format', 'emit', 'progress', 'table', 'to_yaml')

Format = Literal['table', 'json', 'yaml', 'ndjson']

# PyYAML and rich's tables and bars are imported by the functions that draw with them, never by `recall`
# starting: `recall --help` and `--format json` need none of them.


@cache
def _dumper() -> type[yaml.SafeDumper]:
    import yaml

    class Dumper(yaml.SafeDumper):
        def choose_scalar_style(self) -> str:
            # PyYAML writes NEL (U+0085) raw in a quoted scalar, where its reader takes it for a line
            # break and folds it to a space; only a double-quoted scalar escapes it (as `\N`).
            value = getattr(self.event, 'value', None)
            if isinstance(value, str) and '\x85' in value:
                return '"'
            return super().choose_scalar_style()

    return Dumper


def to_yaml(document: Any) -> str:
    """Block-style YAML of a JSON-shaped document (PyYAML, keys in their order) that reads back the same."""
    import yaml

    return yaml.dump(document, Dumper=_dumper(), sort_keys=False, allow_unicode=True, default_flow_style=False)


def emit(document: dict[str, Any], fmt: Format, *, items: Sequence[Any], human: Callable[[], Any]) -> None:
    """Print `document` in `fmt`; `ndjson` prints `items` one per line; `table` prints what `human()` gives."""
    if fmt == 'json':
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + '\n')
    elif fmt == 'ndjson':
        sys.stdout.writelines(json.dumps(item, ensure_ascii=False) + '\n' for item in items)
    elif fmt == 'yaml':
        sys.stdout.write(to_yaml(document))
    else:
        from rich.console import Console
        from rich.text import Text

        shown = human()
        Console(highlight=False).print(shown, soft_wrap=isinstance(shown, Text))


def table(*columns: str, rows: Sequence[Sequence[object]], wide: str | None = None) -> Table:
    """A table that fits the console's width; the `wide` column takes what the others leave."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    shown = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, show_header=any(columns))
    for name in columns:
        shown.add_column(name, overflow='fold', ratio=1 if name == wide else None, no_wrap=name != wide)
    for row in rows:
        shown.add_row(*(Text('-' if cell is None else str(cell)) for cell in row))
    return shown


def _rate(unit: str) -> ProgressColumn:
    """A bar's column showing how many `unit`s a second the job does."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f'{task.speed:,.0f} {unit}/s' if task.speed else '', style='progress.data.speed')

    return Rate()


class Update(Protocol):
    def __call__(self, done: int, total: int, what: str | None = None, /) -> None:
        """How far a job is, and what it is doing now (`None`: the same as before)."""


@contextmanager
def progress(verb: str, unit: str) -> Generator[Update]:
    """`update` for a job: a bar with rate and time left on a terminal, lines elsewhere."""
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True)
    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn('{task.description}'), BarColumn(), MofNCompleteColumn(), _rate(unit))
        with Progress(*columns, TimeRemainingColumn(), console=console) as bar:
            task = bar.add_task(verb, total=None)

            def draw(done: int, total: int, what: str | None = None, /) -> None:
                bar.update(task, completed=done, total=total, description=what or verb)

            yield draw
        return
    started = time.monotonic()
    last = [started - 1.0]

    def line(done: int, total: int, what: str | None = None, /) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < 1.0 and what is None:
            return
        last[0] = now
        elapsed = now - started
        details: list[str] = []
        if done >= total:
            details.append(f'done in {elapsed:.1f}s')
        elif done:
            details.append(f'about {(total - done) * elapsed / done:.0f}s left')
        if done and elapsed > 0:
            details.append(f'{done / elapsed:,.0f} {unit}/s')
        suffix = f' ({", ".join(details)})' if details else ''
        console.print(Text(f'{what or verb} {done}/{total} {unit}{suffix}'), soft_wrap=True)

    yield line
