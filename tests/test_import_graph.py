"""The package's imports point one way: no module imports, directly or through others, one that imports it.

Every import counts, including those under `TYPE_CHECKING` and inside functions: a cycle hidden by a
lazy import is still a cycle in the design. A module importing a name from its own package's
`__init__` is not counted against that package (Python runs the `__init__` first anyway).
"""

from __future__ import annotations

import ast
from pathlib import Path

import temporal_recall

PACKAGE = Path(temporal_recall.__file__).parent


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package `__init__`) for every module under `root`."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob('*.py'):
        parts = list(path.relative_to(root.parent).with_suffix('').parts)
        is_package = parts[-1] == '__init__'
        if is_package:
            parts.pop()
        found['.'.join(parts)] = (path, is_package)
    return found


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ''
    base = module.split('.') if is_package else module.split('.')[:-1]
    base = base[: len(base) - (level - 1)]
    return '.'.join([*base, *([target] if target else [])])


def import_graph(root: Path) -> dict[str, set[str]]:
    """Which modules of the package under `root` each of its modules imports."""
    modules = _modules(root)
    top = root.name
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(name, is_package, node.level, node.module)
                for alias in node.names:
                    child = f'{source}.{alias.name}'
                    targets.add(child if child in modules else source)
        graph[name] = {
            target
            for target in targets
            if target.split('.')[0] == top
            and target in modules
            and target != name
            and not name.startswith(f'{target}.')
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE))
    assert not found, f'Import cycles (break each by moving the shared piece down a layer): {found}'


def test_the_check_finds_a_cycle_through_type_checking_and_lazy_imports(tmp_path: Path) -> None:
    package = tmp_path / 'pkg'
    (package / 'sub').mkdir(parents=True)
    (package / '__init__.py').write_text('')
    (package / 'a.py').write_text('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import b\n')
    (package / 'sub' / '__init__.py').write_text('')
    (package / 'sub' / 'b.py').write_text('def f():\n    from ..c import x\n')
    (package / 'c.py').write_text('import pkg.a\nx = 1\n')
    (package / 'd.py').write_text('from . import c\n')
    assert cycles(import_graph(package)) == [['pkg.a', 'pkg.c', 'pkg.sub.b']]


BELOW_THE_STORE = {
    'temporal_recall.errors',
    'temporal_recall.content',
    'temporal_recall._validation',
    'temporal_recall.text',
    'temporal_recall.text._analyzer',
    'temporal_recall.text._documents',
}
"""What the store may import from the rest of the package: errors, message content, input rules and
text analysis, all pure and themselves importing nothing above the store."""


def _reach(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def test_the_store_depends_on_nothing_above_it() -> None:
    graph = import_graph(PACKAGE)
    store = {
        module for module in graph if module == 'temporal_recall.store' or module.startswith('temporal_recall.store.')
    }
    above = _reach(graph, store) - store - BELOW_THE_STORE
    assert not above, f'The store imports modules above it (move the shared piece into the store or below it): {above}'


DRIVERS = ('sqlite', 'postgres', '_open')
"""The store's drivers (folders) and `open_store`, which picks one by URL."""


def test_the_store_engine_knows_no_backend() -> None:
    """A third backend is one driver: no engine module imports a driver or a database library, or asks
    a dialect which backend it is (it asks what the dialect can do)."""
    graph = import_graph(PACKAGE)
    store = PACKAGE / 'store'
    files = {
        'temporal_recall.store.' + '.'.join(path.relative_to(store).with_suffix('').parts): path
        for path in store.rglob('*.py')
        if path.relative_to(store).parts[0] not in DRIVERS and path.stem not in DRIVERS and path.stem != '__init__'
    }
    engine = set(files)

    def is_driver(target: str) -> bool:
        return target.removeprefix('temporal_recall.store.').split('.')[0] in DRIVERS

    for module in sorted(engine):
        drivers = {target for target in graph[module] if is_driver(target)}
        assert not drivers, f'{module} imports the drivers {drivers}: ask the session or its dialect instead'
        tree = ast.parse(files[module].read_text(encoding='utf-8'))
        libraries = {
            alias.name.split('.')[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        } | {node.module.split('.')[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not libraries & {'sqlite3', 'aiosqlite', 'asyncpg'}, f'{module} imports a database library'
        names = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == 'name'
            and isinstance(node.value, ast.Attribute | ast.Name)
            and (node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id) == 'dialect'
        ]
        assert not names, f'{module} asks the dialect for its name (lines {names}): branch on a capability instead'
