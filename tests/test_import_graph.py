"""The package's imports point one way: no module imports, directly or through others, one that imports it,
and no top-level module or subpackage depends on one that depends on it.

Every import counts, including those under `TYPE_CHECKING` and inside functions: a cycle hidden by a
lazy import is still a cycle in the design. A module importing a name from its own package's
`__init__` is not counted against that package (Python runs the `__init__` first anyway).
"""

from __future__ import annotations

import ast
from itertools import pairwise
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


def unit_of(module: str) -> str | None:
    """The top-level module or subpackage `module` belongs to (`pkg.store` for `pkg.store.log._append`);
    `None` for the package itself, whose `__init__` only re-exports."""
    parts = module.split('.')
    return '.'.join(parts[:2]) if len(parts) > 1 else None


def package_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """The imports between top-level modules and subpackages: `{unit: {imported unit: [(importer,
    imported), ...]}}`, where an import of any module inside a subpackage is an import of the subpackage."""
    units: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for module in sorted(graph):
        unit = unit_of(module)
        if unit is None:
            continue
        arrows = units.setdefault(unit, {})
        for target in sorted(graph[module]):
            other = unit_of(target)
            if other is not None and other != unit:
                arrows.setdefault(other, []).append((module, target))
                units.setdefault(other, {})
    return units


def _loop(start: str, group: list[str], arrows: dict[str, dict[str, list[tuple[str, str]]]]) -> list[str]:
    """A shortest way from `start` round `group` (a strongly connected set of units) back to it."""
    came_from: dict[str, str] = {}
    todo = [start]
    while todo:
        unit = todo.pop(0)
        for other in sorted(arrows[unit]):
            if other == start:
                path = [unit]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if other in group and other not in came_from:
                came_from[other] = unit
                todo.append(other)
    raise AssertionError(f'{group} is not a cycle')


def package_cycles(root: Path) -> list[str]:
    """The cycles between the top-level modules and subpackages of the package under `root`: for each
    group that depends on itself, ways round it through every member, with one import making each arrow."""
    arrows = package_graph(import_graph(root))
    found: list[str] = []
    for group in cycles({unit: set(targets) for unit, targets in arrows.items()}):
        covered: set[str] = set()
        for start in group:
            if start in covered:
                continue
            path = _loop(start, group, arrows)
            covered.update(path)
            steps = [f'{arrows[a][b][0][0]} imports {arrows[a][b][0][1]}' for a, b in pairwise(path)]
            found.append(f'{" -> ".join(path)} ({"; ".join(steps)})')
    return found


def test_no_cycle_between_top_level_packages() -> None:
    found = package_cycles(PACKAGE)
    assert not found, 'Import cycles between top-level packages (move the shared piece below both): ' + '; '.join(found)


def test_the_package_check_finds_a_cycle_no_module_is_on(tmp_path: Path) -> None:
    """`a` imports one module of `sub` and another module of `sub` imports `a`: no module imports itself
    back, yet `a` and `sub` depend on each other."""
    package = tmp_path / 'pkg'
    (package / 'sub').mkdir(parents=True)
    (package / '__init__.py').write_text('from . import a\n')
    (package / 'a.py').write_text('from .sub.x import y\n')
    (package / 'sub' / '__init__.py').write_text('')
    (package / 'sub' / 'x.py').write_text('y = 1\n')
    (package / 'sub' / 'z.py').write_text('from pkg.a import w\n')
    (package / 'b.py').write_text('from .sub import z\n')
    assert cycles(import_graph(package)) == []
    assert package_cycles(package) == ['pkg.a -> pkg.sub -> pkg.a (pkg.a imports pkg.sub.x; pkg.sub.z imports pkg.a)']


BELOW_THE_STORE = {
    'temporal_recall.errors',
    'temporal_recall.content',
    'temporal_recall._message_fields',
    'temporal_recall._pydantic_ai_private',
    'temporal_recall._validation',
    'temporal_recall._search_terms',
    'temporal_recall._body_references',
    'temporal_recall._renamed',
    'temporal_recall.text',
    'temporal_recall.text._analyzer',
    'temporal_recall.text._documents',
    'temporal_recall.embeddings',
    'temporal_recall.embeddings._index',
    'temporal_recall.embeddings._local',
    'temporal_recall.embeddings._protocol',
    'temporal_recall.embeddings._source',
    'temporal_recall.embeddings._vectors',
}
"""What the store may import from the rest of the package: errors, message content (with the fields of its
canonical form and the pydantic-ai private names it needs), input rules (with the search's vocabulary they
check), the codec bodies' reference format and text analysis, all pure and themselves importing nothing
above the store; and the embedding of documents (`embeddings`), which a save uses to write vectors with its
entries, itself importing only those: what it needs of a store is its own protocol (`VectorWrites`), which
the store's `VectorIndex` extends."""


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


SEARCH_ACTIVITY_SIDE = {
    'temporal_recall.search.plan',
    'temporal_recall.search._meaning',
    'temporal_recall.search._paging',
}
"""The search modules that await a store or an embedding model: above the pure ranking, never imported by it."""


def test_the_pure_search_reaches_neither_its_activity_side_nor_the_store() -> None:
    """Workflows import `search` in the sandbox: what it reaches must be pure, the store's protocol aside."""
    graph = import_graph(PACKAGE)
    pure = {
        module
        for module in graph
        if (module == 'temporal_recall.search' or module.startswith('temporal_recall.search.'))
        and module not in SEARCH_ACTIVITY_SIDE
    }
    reached = _reach(graph, pure) - pure
    above = reached & SEARCH_ACTIVITY_SIDE | {
        module
        for module in reached
        if module.startswith('temporal_recall.store') and module != 'temporal_recall.store.protocol'
    }
    assert not above, f'The pure search imports what awaits a store: {sorted(above)}'


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


STORE_LAYERS: dict[str, set[str]] = {
    'protocol': set(),
    'sql': set(),
    'postings': {'sql'},
    'index': {'sql', 'postings'},
    'log': {'sql', 'index'},
    'integrity': {'sql', 'postings', 'index'},
    'engine': {'sql', 'postings', 'index', 'log', 'integrity'},
    'sqlite': {'sql', 'engine'},
    'postgres': {'sql', 'engine'},
    'open': {'sqlite', 'postgres'},
}
"""Which parts of the store each part may import, besides itself and `protocol` (the seam everyone shares).

A part is a folder of `store/`, or: `protocol`; `engine`, the store's own top-level modules (the store
class, bodies, input checks, applying migrations); `open`, which picks a driver by URL. The
package `__init__` may import anything (it only re-exports). docs/design/store.md draws the map."""


def store_part(module: str, package: str = 'temporal_recall') -> str | None:
    """The part of the store (`STORE_LAYERS`) `module` belongs to, `'init'` for the package, `None` outside."""
    store = f'{package}.store'
    if module == store:
        return 'init'
    if not module.startswith(f'{store}.'):
        return None
    first = module.removeprefix(f'{store}.').split('.')[0]
    if first in STORE_LAYERS:
        return first
    return 'open' if first == '_open' else 'engine'


def disallowed_arrows(graph: dict[str, set[str]], package: str = 'temporal_recall') -> list[tuple[str, str]]:
    """`(importer, imported)` pairs of store modules whose parts `STORE_LAYERS` does not connect."""
    found: list[tuple[str, str]] = []
    for module in sorted(graph):
        part = store_part(module, package)
        if part is None or part == 'init':
            continue
        for target in sorted(graph[module]):
            other = store_part(target, package)
            if other is not None and other not in {part, 'protocol', 'init'} and other not in STORE_LAYERS[part]:
                found.append((module, target))
    return found


def private_imports(graph: dict[str, set[str]], package: str = 'temporal_recall') -> list[tuple[str, str]]:
    """`(importer, imported)` pairs where a module outside `store` or `search` imports one of their private
    modules (a `_name` anywhere below the package): callers use the package's public names."""
    found: list[tuple[str, str]] = []
    for guarded in (f'{package}.store', f'{package}.search'):
        for module in sorted(graph):
            if module == guarded or module.startswith(f'{guarded}.'):
                continue
            for target in sorted(graph[module]):
                inside = target.removeprefix(f'{guarded}.').split('.') if target.startswith(f'{guarded}.') else []
                if any(part.startswith('_') for part in inside):
                    found.append((module, target))
    return found


def test_the_store_parts_import_only_what_the_layout_allows() -> None:
    arrows = disallowed_arrows(import_graph(PACKAGE))
    assert not arrows, (
        f'Imports between store parts that STORE_LAYERS does not allow (see docs/design/store.md): {arrows}'
    )


def test_no_module_outside_the_store_or_search_imports_their_private_modules() -> None:
    found = private_imports(import_graph(PACKAGE))
    assert not found, f'Import the public names (store, store.protocol, search) instead: {found}'


def test_the_layout_checks_find_a_wrong_arrow_and_a_private_import(tmp_path: Path) -> None:
    package = tmp_path / 'temporal_recall'
    for folder in ('store', 'store/sql', 'store/index', 'store/log', 'search', 'cli'):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / '__init__.py').write_text('')
    (package / '__init__.py').write_text('')
    (package / 'store' / 'protocol.py').write_text('')
    (package / 'store' / 'sql' / '_session.py').write_text('from .. import protocol\n')
    (package / 'store' / 'log' / '_reads.py').write_text('from ..sql import _session\nfrom ..index import _reader\n')
    (package / 'store' / 'index' / '_reader.py').write_text('from ..log import _reads\n')
    (package / 'search' / '_plan.py').write_text('from temporal_recall.store.protocol import x\n')
    (package / 'cli' / '_run.py').write_text(
        'from ..store.log import _reads\nfrom ..search._plan import y\n'
        'from ..store import protocol\nfrom .. import search\n'
    )
    graph = import_graph(package)
    assert disallowed_arrows(graph) == [('temporal_recall.store.index._reader', 'temporal_recall.store.log._reads')]
    assert private_imports(graph) == [
        ('temporal_recall.cli._run', 'temporal_recall.store.log._reads'),
        ('temporal_recall.cli._run', 'temporal_recall.search._plan'),
    ]
