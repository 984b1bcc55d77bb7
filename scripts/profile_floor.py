"""Where the floor's CPU goes: pydantic-ai's work for one more capability, or this project's (issue 52, item 2).

    /work/main/.venv/bin/python scripts/profile_floor.py [--runs 300] [--rounds 6] [--profile-runs 300] [--top 25]

With PYTHONPATH set to a checkout's `src`, it measures that checkout's temporal_recall (the script and
`bench/` stay this one's): run it alternately for two commits to compare them (docs/benchmarks/floor.md).

A script that prints numbers, never a timed test. The floor is `bench.fleet_agent.NothingStored`:
`ConversationRecall` over a store that keeps nothing. Runs are made as `scripts/measure_step_cost.py`
makes them: the 4-request agent of `bench/fleet_agent.py`, a plain `agent.run` in a conversation of its
own, no `TemporalDurability`, no model latency.

Three measurements, each in this one process:

1. Side by side, process CPU per run (`time.process_time`), the variants alternating within each
   round (the order reverses every round), median per cell, several rounds:

   - `without`   the agent without any capability;
   - `hooks`     a capability of ours' shape that does nothing: the same hooks overridden as no-ops
                 (`before_run`, `after_model_request`, `after_node_run`, `after_run`, `on_run_error`,
                 a `for_run` that returns a copy), no tool, no wrapper model;
   - `+model`    that, and `get_wrapper_model` returning a passthrough `WrapperModel`;
   - `shape`     that, and a toolset of one tool with the recall tool's name, signature, docstring and
                 metadata (never called, as ours never is): the pydantic-ai-only control, everything
                 pydantic-ai does for a capability of ours' shape and none of our work;
   - `floor`     `ConversationRecall(store=NothingStored())`, the floor itself;
   - `floor-tool` the floor with `search_tool=False`.

   `shape - without` is pydantic-ai's part; `floor - shape` is ours.

2. Ours, measured from the inside: the floor's runs with a CPU clock around each of our entry points
   (the capability's hooks, `get_wrapper_model`, and `PersistingModel.request` less the wrapped
   model's own request), and a count of the messages serialised for a hash per run, and of those
   serialised more than once. This is the direct measure of "ours"; it should agree with
   `floor - shape` from (1) to within the spread.

3. A cProfile of the floor's runs (timer: thread CPU), the functions our entry points reached, by
   cumulative and by own time, as shares of our profiled time (cProfile inflates Python-heavy code
   more than C-heavy: read the ranking, not the totals).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import importlib
import inspect
import os
import pstats
import statistics
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# PYTHONPATH, when set, picks the temporal_recall measured: the src of main's checkout or of a branch's worktree.
if not os.environ.get('PYTHONPATH'):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._provenance import header
from bench.fleet_agent import WITHOUT, NothingStored, build, prompt_for
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

import temporal_recall
from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.capability import _conversation_recall, _persisting_model
from temporal_recall.search import Role, SearchMode

# --- the pydantic-ai-only control: a capability of ours' shape that does none of our work ------------


class PassThrough(WrapperModel):
    """A wrapper model that only forwards, as `PersistingModel` would with nothing to store."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self.wrapped.request(messages, model_settings, model_request_parameters)


async def _search(
    ctx: RunContext[Any],
    query: str,
    run_id: str | None = None,
    role: Role | None = None,
    mode: SearchMode | None = None,
) -> str:
    return ''  # never called: the scripted model calls `lookup` only


_search.__doc__ = ConversationRecall._search_tool.__doc__  # pyright: ignore[reportPrivateUsage]
"""The same description, so the same tool definition (schema and text) is built and sent."""


class Hooks(AbstractCapability[Any]):
    """The hooks `ConversationRecall` overrides, as no-ops (pydantic-ai dispatches only overridden ones)."""

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        return copy.copy(self)

    async def before_run(self, ctx: RunContext[Any]) -> None:
        return None

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        return response

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        return result

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        return result

    async def on_run_error(self, ctx: RunContext[Any], *, error: BaseException) -> Any:
        raise error


class HooksAndModel(Hooks):
    def get_wrapper_model(self, model: Model) -> Model | None:
        return PassThrough(model)


class SameShape(HooksAndModel):
    """Hooks, a passthrough wrapper model and one tool like the recall tool: pydantic-ai's work alone."""

    def __init__(self) -> None:
        self._toolset = FunctionToolset(
            [
                Tool(
                    _search,
                    name=_conversation_recall.SEARCH_TOOL_NAME,
                    takes_ctx=True,
                    metadata={'temporal': dict(_conversation_recall.SEARCH_TOOL_ACTIVITY)},
                )
            ],
            id='recall-search',
        )

    def get_toolset(self) -> AbstractToolset[Any] | None:
        return self._toolset


def _ping() -> str:
    """Ping."""
    return 'pong'


class TinyTool(HooksAndModel):
    """`SameShape` with a tool of no parameters and a one-word description: does the schema's size matter?"""

    def __init__(self) -> None:
        self._toolset = FunctionToolset([Tool(_ping, name='ping')], id='tiny')

    def get_toolset(self) -> AbstractToolset[Any] | None:
        return self._toolset


VARIANTS: dict[str, Callable[[], AbstractCapability[Any] | None]] = {
    'without': lambda: None,
    'hooks': Hooks,
    '+model': HooksAndModel,
    'shape': SameShape,
    'tiny-tool': TinyTool,
    'floor': lambda: ConversationRecall(store=NothingStored()),
    'floor-tool': lambda: ConversationRecall(store=NothingStored(), search_tool=False),
}
"""Each variant's capability (`None`: without). To compare two commits, run this script with PYTHONPATH at
each one's src, alternately (docs/benchmarks/floor.md)."""
DEFAULT_VARIANTS = (
    'without',
    'hooks',
    '+model',
    'shape',
    'tiny-tool',
    'floor',
    'floor-tool',
)


def agent_of(variant: str) -> Any:
    # `build` puts its `recall` argument in the agent's capabilities, whatever capability it is.
    return build(WITHOUT, recall=VARIANTS[variant](), latency=0, durable=False)  # type: ignore[arg-type]


async def one_run(agent: Any) -> None:
    conversation_id = f'floor-{uuid.uuid4().hex[:12]}'
    await agent.run(prompt_for(conversation_id), conversation_id=conversation_id, deps=RecallDeps())


async def batch(agent: Any, runs: int) -> list[float]:
    spent: list[float] = []
    for _ in range(runs):
        started = time.process_time()
        await one_run(agent)
        spent.append(time.process_time() - started)
    return spent


# --- 1. side by side -----------------------------------------------------------------------------------


async def side_by_side(args: argparse.Namespace) -> dict[str, list[float]]:
    """Per variant, the median CPU per run of each round. Within a round the variants take turns run by run
    (the order reversed every other turn), so a change in the machine's load falls on all of them alike."""
    agents = {variant: agent_of(variant) for variant in args.variants}
    for agent in agents.values():
        await batch(agent, args.warmup)
    medians: dict[str, list[float]] = defaultdict(list)
    for number in range(args.rounds):
        cells: dict[str, list[float]] = defaultdict(list)
        for turn in range(args.runs):
            order = list(agents) if turn % 2 == 0 else list(reversed(agents))
            for variant in order:
                cells[variant] += await batch(agents[variant], 1)
        for variant in agents:
            medians[variant].append(statistics.median(cells[variant]))
        base = statistics.median(cells['without'])
        mids = {variant: statistics.median(cells[variant]) for variant in agents}
        described = (f'{variant} {mid * 1000:.2f} ({mid / base:.2f}x)' for variant, mid in mids.items())
        print(f'round {number + 1}: ' + ' | '.join(described), flush=True)
    return medians


def describe_side_by_side(medians: dict[str, list[float]]) -> str:
    def mid(variant: str) -> float:
        return statistics.median(medians[variant])

    lines = ['', 'median over rounds, ms CPU per run [min-max of the round medians]; ratio to without']
    for variant, values in medians.items():
        lines.append(
            f'  {variant:11} {mid(variant) * 1000:6.2f} [{min(values) * 1000:.2f}-{max(values) * 1000:.2f}]'
            f'  {mid(variant) / mid("without"):.2f}x'
        )
    if {'without', 'shape', 'floor'} <= set(medians):
        # The split per round (the variants of one round ran side by side), then its median and spread.
        rounds = range(len(medians['without']))
        added = [medians['floor'][r] - medians['without'][r] for r in rounds]
        theirs = [medians['shape'][r] - medians['without'][r] for r in rounds]
        ours = [medians['floor'][r] - medians['shape'][r] for r in rounds]
        lines.append('')
        lines.append("the floor's extra CPU per run, per round: median [min-max]")
        for label, values in (
            ('floor - without (all)', added),
            ('shape - without (pydantic-ai)', theirs),
            ('floor - shape (ours)', ours),
        ):
            lines.append(
                f'  {label:30} {statistics.median(values) * 1000:5.2f} ms'
                f' [{min(values) * 1000:.2f}-{max(values) * 1000:.2f}]'
            )
        share = [o / a for o, a in zip(ours, added, strict=True) if a > 0]
        if share:
            lines.append(
                f"  ours as a share of the floor's extra: {statistics.median(share):.0%}"
                f' [{min(share):.0%}-{max(share):.0%}]'
            )
        lines.append('')
        lines.append('differences, per round: median [min-max] (negative: the right-hand variant costs less)')
        steps = {
            'a capability with no-op hooks': ('without', 'hooks'),
            '+ a passthrough wrapper model': ('hooks', '+model'),
            '+ one tool like the recall tool': ('+model', 'shape'),
            '+ a one-word tool of no parameters': ('+model', 'tiny-tool'),
            'recall-like tool vs one-word tool': ('tiny-tool', 'shape'),
            'the recall tool in the floor': ('floor-tool', 'floor'),
        }
        for step, (lower, upper) in steps.items():
            if lower in medians and upper in medians:
                values = [medians[upper][r] - medians[lower][r] for r in rounds]
                lines.append(
                    f'  {step:36} {statistics.median(values) * 1000:6.2f} ms'
                    f' [{min(values) * 1000:.2f} to {max(values) * 1000:.2f}]'
                )
    return '\n'.join(lines)


# --- 2. ours, from the inside ----------------------------------------------------------------------------


class Clocks:
    """Process CPU inside each of a set of functions, summed over runs (nothing else runs meanwhile: no
    await in a floor run suspends, so the clock around a coroutine counts only its own work)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._undo: list[Callable[[], None]] = []

    def around(self, owner: Any, name: str, label: str) -> None:
        """Time `owner.name` (a class's method, or a module's global as the module that calls it sees it)."""
        namespace = owner.__dict__ if isinstance(owner, type) else vars(owner)
        original = namespace[name]
        function = original.__func__ if isinstance(original, classmethod) else original
        seconds, calls = self.seconds, self.calls
        if inspect.iscoroutinefunction(function):

            async def timed(*args: Any, **kwargs: Any) -> Any:
                started = time.process_time()
                try:
                    return await function(*args, **kwargs)
                finally:
                    seconds[label] += time.process_time() - started
                    calls[label] += 1

        else:

            def timed(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                started = time.process_time()
                try:
                    return function(*args, **kwargs)
                finally:
                    seconds[label] += time.process_time() - started
                    calls[label] += 1

        replacement = classmethod(timed) if isinstance(original, classmethod) else timed
        setattr(owner, name, replacement)
        self._undo.append(lambda: setattr(owner, name, original))

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def _our_entry_points(clocks: Clocks) -> None:
    """The clocks whose sum is ours: they do not nest (the model and the store are taken out after)."""
    recall, persisting = ConversationRecall, _persisting_model.PersistingModel
    for name in ('for_run', 'before_run', 'after_model_request', 'after_node_run', 'after_run', 'get_wrapper_model'):
        clocks.around(recall, name, f'ConversationRecall.{name}')
    clocks.around(persisting, 'request', 'PersistingModel.request')
    clocks.around(FunctionModel, 'request', 'the wrapped model')
    clocks.around(NothingStored, 'append', 'the store')


_CAPABILITY = 'temporal_recall.capability.'
PIECES: tuple[tuple[str, str | None, str, str], ...] = (
    # Hashing: every serialisation for a hash goes through `content._canonical`, once.
    (
        'temporal_recall.content',
        None,
        '_canonical',
        'content._canonical (a serialisation for a hash: dump, canonical form)',
    ),
    # The rest of a step's work, by piece (each may contain serialisations; see the note).
    (f'{_CAPABILITY}_persisting_model', None, 'stamp_tool_call_parts', 'stamp_tool_call_parts (pydantic-ai private)'),
    (
        f'{_CAPABILITY}_step_write',
        None,
        'traced_append',
        "traced_append (OpenTelemetry span around the store's append)",
    ),
    (f'{_CAPABILITY}_step_write', None, 'embedded_append', 'embedded_append (embedder lookup, then traced_append)'),
    (f'{_CAPABILITY}_persisting_model', None, 'marked', 'marked (the step marker, made)'),
    (f'{_CAPABILITY}_conversation_recall', None, 'take_marker', 'take_marker (the step marker, taken off)'),
    (f'{_CAPABILITY}_step_write', 'StepWrite', 'start', 'StepWrite.start (incl. uuid4, scope, function tools)'),
    (
        f'{_CAPABILITY}_step_write',
        'StepWrite',
        '_request',
        'StepWrite._request (AppendRequest built, incl. resent hash)',
    ),
    (f'{_CAPABILITY}_step_write', 'StepWrite', 'stamped', 'StepWrite.stamped (a copy of the response)'),
    (f'{_CAPABILITY}_conversation_recall', 'ConversationRecall', '_absorb_stored_steps', '_absorb_stored_steps'),
    (f'{_CAPABILITY}_conversation_recall', 'ConversationRecall', '_check_sizes', '_check_sizes (incl. size_of hash)'),
    (f'{_CAPABILITY}_conversation_recall', 'ConversationRecall', '_store_boundary', '_store_boundary'),
    (f'{_CAPABILITY}_delta', 'DeltaTracker', 'pending', 'DeltaTracker.pending (incl. hashes)'),
)
"""Where each piece is (module, class or `None` for a module global, name), as the measured commit has it:
a piece the commit lacks is left out. Written for the layout since capability/_persisting_model.py split."""
HASHES = 1
"""The first entries of `PIECES`: all the hashing."""


def _pieces() -> list[tuple[Any, str, str]]:
    found: list[tuple[Any, str, str]] = []
    for module_name, owner_name, name, label in PIECES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner = getattr(module, owner_name, None) if owner_name else module
        namespace = (owner.__dict__ if isinstance(owner, type) else vars(owner)) if owner is not None else {}
        if name in namespace:
            found.append((owner, name, label))
    return found


async def _timed_runs(agent: Any, runs: int, warmup: int, clocks: Clocks | None = None) -> list[float]:
    await batch(agent, warmup)
    if clocks is not None:
        clocks.reset()
    return await batch(agent, runs)


async def from_inside(args: argparse.Namespace, variant: str) -> str:
    """Ours in `variant` (a variant of the floor): by entry point, by piece, and serialisations per message."""
    runs = args.inside_runs
    agent = agent_of(variant)
    # Pass 1: our entry points, nothing else (the fewest clocks, the least they add).
    clocks = Clocks()
    _our_entry_points(clocks)
    try:
        cpu = await _timed_runs(agent, runs, args.warmup, clocks)
    finally:
        clocks.undo()
    seconds = dict(clocks.seconds)
    calls = dict(clocks.calls)
    model, store = seconds.pop('the wrapped model'), seconds.pop('the store')
    seconds['PersistingModel.request'] -= model + store
    ours = sum(seconds.values())
    plain = statistics.median(await batch(agent, runs))
    lines = [
        f'ours from the inside: {runs} {variant} runs, process CPU per run, a clock around each of our entry points',
        f'  a run: {statistics.median(cpu) * 1000:.2f} ms median with these clocks, {plain * 1000:.2f} ms without them',
        f'  {"ms/run":>7} {"calls/run":>9}  entry point',
    ]
    for label, value in sorted(seconds.items(), key=lambda item: -item[1]):
        note = ' (less the wrapped model and the store)' if label == 'PersistingModel.request' else ''
        lines.append(f'  {value / runs * 1000:7.3f} {calls[label] / runs:9.1f}  {label}{note}')
    lines.append(f'  {ours / runs * 1000:7.3f} {"":9}  ours in all')
    lines.append(f'  {store / runs * 1000:7.3f} {"":9}  (not ours: the store, NothingStored.append)')
    lines.append(f'  {model / runs * 1000:7.3f} {"":9}  (not ours: the scripted model, in every variant)')
    # Pass 2: the pieces of ours, each on its own clock.
    clocks = Clocks()
    pieces = _pieces()
    for owner, name, label in pieces:
        clocks.around(owner, name, label)
    try:
        await _timed_runs(agent, runs, args.warmup, clocks)
    finally:
        clocks.undo()
    hashing = sum(clocks.seconds[label] for _, _, label in pieces[:HASHES])
    hash_calls = sum(clocks.calls[label] for _, _, label in pieces[:HASHES])
    lines += [
        '',
        '  of which, by piece (a second pass, each on its own clock; pieces may contain the hashes above them):',
        f'  {"ms/run":>7} {"calls/run":>9}  {"us/call":>7}  piece',
    ]
    for index, (_, _, label) in enumerate(pieces):
        if index == HASHES:
            lines.append(
                f'  {hashing / runs * 1000:7.3f} {hash_calls / runs:9.1f}  {hashing / max(hash_calls, 1) * 1e6:7.1f}'
                '  = all hashing (serialise, canonicalise, sha256), a share of ours: '
                f'{hashing / ours:.0%}'
            )
        value, count = clocks.seconds.get(label, 0.0), clocks.calls.get(label, 0)
        lines.append(f'  {value / runs * 1000:7.3f} {count / runs:9.1f}  {value / max(count, 1) * 1e6:7.1f}  {label}')
    lines.append('')
    lines.append(await serialisations(agent, runs, args.warmup))
    return '\n'.join(lines)


async def serialisations(agent: Any, runs: int, warmup: int) -> str:
    """How often a run serialises each of its messages for a hash (`content._serialized`, which
    `content_hash`, `resent_hash`, `canonical_json` and `form_1_hashes` all go through), and who asked."""
    from temporal_recall import content

    original = content._serialized  # pyright: ignore[reportPrivateUsage]
    per_run: list[Counter[Any]] = []
    callers: Counter[str] = Counter()

    def serialized(message: ModelMessage) -> dict[str, Any]:
        frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
        while frame.f_back is not None and frame.f_code.co_filename == content.__file__:
            frame = frame.f_back  # the first caller outside content.py: who asked
        outer = frame.f_back
        asker = f'{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}'
        if outer is not None and frame.f_code.co_name in ('<listcomp>', '_fact', 'hash_of', 'size_of'):
            asker += f' <- {outer.f_code.co_name}'
            if outer.f_back is not None and outer.f_code.co_name in ('_fact', 'hash_of', 'size_of', '_written_hashes'):
                asker += f' <- {outer.f_back.f_code.co_name}'
        callers[asker] += 1
        data = original(message)
        per_run[-1][_identity(data)] += 1
        return data

    for _ in range(warmup):
        await one_run(agent)
    content._serialized = serialized  # pyright: ignore[reportPrivateUsage]
    try:
        for _ in range(runs):
            per_run.append(Counter())
            await one_run(agent)
    finally:
        content._serialized = original  # pyright: ignore[reportPrivateUsage]
    total = statistics.fmean(sum(c.values()) for c in per_run)
    distinct = statistics.fmean(len(c) for c in per_run)
    lines = [
        'messages serialised for a hash (content._serialized), per run:',
        f'  {total:.1f} serialisations of {distinct:.1f} distinct messages ({total / distinct:.2f} per message);'
        ' by who asked:',
    ]
    for asker, count in callers.most_common():
        lines.append(f'  {count / runs:6.1f}  {asker}')
    repeats = Counter(count for c in per_run for count in c.values())
    lines.append(
        '  one message serialised n times in a run: '
        + ', '.join(f'{times}x: {n / runs:.1f} messages' for times, n in sorted(repeats.items()))
    )
    return '\n'.join(lines)


def _identity(data: dict[str, Any]) -> Any:
    """A serialised message without the stamps pydantic-ai adds after the fact (so a stamped copy and the
    run's copy count as one message)."""
    parts = tuple(
        tuple(sorted((k, repr(v)) for k, v in part.items() if k != 'timestamp')) for part in data.get('parts', [])
    )
    return (data.get('kind'), parts)


# --- 3. the profile ---------------------------------------------------------------------------------------


def _where(function: tuple[str, int, str]) -> str:
    filename, line, name = function
    if filename == '~':
        return name
    path = Path(filename)
    for anchor in ('temporal_recall', 'site-packages', 'python3.11'):
        if anchor in path.parts:
            path = Path(*path.parts[path.parts.index(anchor) + (anchor != 'temporal_recall') :])
            break
    return f'{path}:{line}({name})'


class PausableClock:
    """Thread CPU that stands still while paused: the profile's timer, paused while ours calls out to the
    wrapped model or the store, so neither's time counts in any of ours' cumulative figures."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._paused_at: float | None = None
        self.paused_seconds = 0.0

    def __call__(self) -> float:
        if self._paused_at is not None:
            return self._paused_at - self._offset
        return time.thread_time() - self._offset

    def pause(self) -> None:
        self._paused_at = time.thread_time()

    def resume(self) -> None:
        assert self._paused_at is not None
        spent = time.thread_time() - self._paused_at
        self._offset += spent
        self.paused_seconds += spent
        self._paused_at = None


class InsideOurs:
    """cProfile enabled only while one of our entry points runs (the capability's hooks, `get_wrapper_model`,
    `PersistingModel.request`), with its clock stopped while ours calls the wrapped model or the store:
    what it lists is what ours does and what it calls, and nothing else."""

    ENTRY_POINTS = (
        *(
            (ConversationRecall, name, True)
            for name in ('for_run', 'before_run', 'after_model_request', 'after_node_run', 'after_run')
        ),
        (ConversationRecall, 'get_wrapper_model', False),
        (_persisting_model.PersistingModel, 'request', True),
    )
    CALLED_OUT = ((FunctionModel, 'request'), (NothingStored, 'append'))

    def __init__(self) -> None:
        self.clock = PausableClock()
        self.profiler = cProfile.Profile(self.clock)
        self._undo: list[Callable[[], None]] = []
        self._depth = 0

    def install(self) -> None:
        for owner, name, is_async in self.ENTRY_POINTS:
            self._patch(owner, name, self._async if is_async else self._sync)
        for owner, name in self.CALLED_OUT:
            self._patch(owner, name, self._paused)

    def _patch(self, owner: type, name: str, wrap: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        self._undo.append(lambda: setattr(owner, name, original))
        setattr(owner, name, wrap(original))

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _enter(self) -> None:
        self._depth += 1
        if self._depth == 1:
            self.profiler.enable()

    def _leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.profiler.disable()

    def _async(self, original: Any) -> Any:
        async def profiled(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return await original(*args, **kwargs)
            finally:
                self._leave()

        return profiled

    def _sync(self, original: Any) -> Any:
        def profiled(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return original(*args, **kwargs)
            finally:
                self._leave()

        return profiled

    def _paused(self, original: Any) -> Any:
        async def called_out(*args: Any, **kwargs: Any) -> Any:
            self.clock.pause()
            try:
                return await original(*args, **kwargs)
            finally:
                self.clock.resume()

        return called_out


async def profiled(args: argparse.Namespace, variant: str) -> str:
    agent = agent_of(variant)
    await batch(agent, args.warmup)
    inside = InsideOurs()
    inside.install()
    try:
        for _ in range(args.profile_runs):
            await one_run(agent)
    finally:
        inside.undo()
    stats: dict[Any, Any] = pstats.Stats(inside.profiler).stats  # type: ignore[attr-defined]
    runs = args.profile_runs
    ours_total = sum(own for (_, _, own, _, _) in stats.values())
    lines = [
        f'cProfile of {runs} {variant} runs, enabled only inside our entry points, its clock (thread CPU) stopped',
        'while ours calls the wrapped model or the store. The profiler inflates every figure, Python-heavy',
        'code most: compare shares, not milliseconds.',
        f'  ours: {ours_total / runs * 1000:.2f} ms per run profiled (the model and the store, left out: '
        f'{inside.clock.paused_seconds / runs * 1000:.2f} ms)',
        '',
        f'  {"cum %":>6} {"own %":>6} {"calls/run":>9}  by cumulative time, as a share of ours',
    ]

    def row(function: Any) -> str:
        _, calls, own, cumulative, _ = stats[function]
        return f'  {cumulative / ours_total:6.1%} {own / ours_total:6.1%} {calls / runs:9.1f}  {_where(function)}'

    lines += [row(f) for f in sorted(stats, key=lambda f: stats[f][3], reverse=True)[: args.top]]
    lines += ['', '  by own time']
    lines += [row(f) for f in sorted(stats, key=lambda f: stats[f][2], reverse=True)[: args.top]]
    return '\n'.join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=300, help='runs per variant per round (default 300)')
    parser.add_argument('--rounds', type=int, default=6, help='rounds, the order reversed every round (default 6)')
    parser.add_argument('--warmup', type=int, default=20, help='untimed runs of each variant first (default 20)')
    parser.add_argument(
        '--variants',
        default=','.join(DEFAULT_VARIANTS),
        type=lambda text: [name.strip() for name in text.split(',') if name.strip()],
        help=f'comma-separated, from {", ".join(VARIANTS)} (without is always included)',
    )
    parser.add_argument('--inside-runs', type=int, default=500, help='clocked runs per --inside variant (0: skip)')
    parser.add_argument('--profile-runs', type=int, default=300, help='profiled runs per --profile variant (0: skip)')
    parser.add_argument(
        '--inside',
        default='floor',
        type=lambda text: [name.strip() for name in text.split(',') if name.strip()],
        help='comma-separated variants of the floor to clock from the inside (default floor)',
    )
    parser.add_argument(
        '--profile',
        default='floor',
        type=lambda text: [name.strip() for name in text.split(',') if name.strip()],
        help='comma-separated variants of the floor to profile (default floor)',
    )
    parser.add_argument('--top', type=int, default=25, help='functions in each profile listing')
    args = parser.parse_args(argv)
    unknown = [name for name in args.variants if name not in VARIANTS]
    if unknown:
        parser.error(f'--variants: unknown {", ".join(unknown)}')
    for option in ('inside', 'profile'):
        if [name for name in getattr(args, option) if not name.startswith('floor') or name not in VARIANTS]:
            parser.error(f'--{option}: variants of the floor only (floor, floor-tool)')
    if 'without' not in args.variants:
        args.variants.insert(0, 'without')
    args.variants = [name for name in VARIANTS if name in args.variants]
    return args


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(header())
    print(f'temporal_recall measured: {Path(temporal_recall.__file__).parent}')
    print(
        f'process CPU per agent.run (4 model requests, 8 messages, no model latency), ms: median of {args.runs} '
        f'runs per cell, {args.rounds} rounds',
        flush=True,
    )
    if args.rounds and args.runs:
        print(describe_side_by_side(await side_by_side(args)), flush=True)
    for variant in args.inside if args.inside_runs else ():
        print('\n' + await from_inside(args, variant), flush=True)
    for variant in args.profile if args.profile_runs else ():
        print('\n' + await profiled(args, variant), flush=True)


if __name__ == '__main__':
    asyncio.run(main())
