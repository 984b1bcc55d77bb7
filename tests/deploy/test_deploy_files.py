"""The files under `deploy/`, checked as far as a machine without a container engine allows.

Nothing here builds an image or starts a container. The files are checked by real validators from
PyPI (hadolint for the Dockerfile, the Kubernetes OpenAPI schemas through `kubernetes-validate`,
the Compose specification through `check-jsonschema`), each also shown to reject a broken copy.
What no validator knows is checked here: the ports, probes and variables agree with each other and
with `settings.ENVIRONMENT_VARIABLES`, and the probe paths and the image's HEALTHCHECK command are
exercised against the worker's real health endpoint.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from temporal_recall.settings import ENVIRONMENT_VARIABLES, Settings
from temporal_recall.worker._health import serve_health

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / 'deploy'
K8S = DEPLOY / 'k8s'
LONGEST_ACTIVITY_TIMEOUT_SECONDS = 60  # pydantic-ai's default start-to-close for agent activities


# --- a tiny Dockerfile parser ---------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    flags: dict[str, str]
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON-array form (`["python", "-m", ...]`), or `None` for shell form."""
        if not self.args.startswith('['):
            return None
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(part, str) for part in value), self
        return value


def parse_dockerfile(text: str) -> list[Instruction]:
    """Join continuation lines, drop comments and blank lines, split off `--flag=value` options."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith('#') or (not stripped and not pending):
            continue  # comments (and parser directives) are dropped, even inside a continuation
        if not pending:
            start = number
        if stripped.endswith('\\'):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        logical = ' '.join(part for part in pending if part)
        pending = []
        keyword, _, rest = logical.partition(' ')
        flags: dict[str, str] = {}
        rest = rest.strip()
        while rest.startswith('--'):
            flag, _, rest = rest.partition(' ')
            name, _, value = flag[2:].partition('=')
            flags[name] = value
            rest = rest.strip()
        instructions.append(Instruction(keyword.upper(), flags, rest, start))
    assert not pending, 'the Dockerfile ends inside a line continuation'
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == 'FROM':
            result.append([])
        elif not result:
            assert instruction.keyword == 'ARG', f'line {instruction.line}: only ARG may precede the first FROM'
            continue
        result[-1].append(instruction)
    return result


def env_pairs(instruction: Instruction) -> dict[str, str]:
    pairs = {}
    for token in shlex.split(instruction.args):
        key, separator, value = token.partition('=')
        assert separator, f'line {instruction.line}: use ENV KEY=value, not the legacy "ENV KEY value"'
        pairs[key] = value
    return pairs


def test_parser_handles_continuations_comments_and_flags() -> None:
    parsed = parse_dockerfile(
        '# syntax=docker/dockerfile:1\nFROM a AS b\nRUN one \\\n    # a comment\n    && two\n'
        'COPY --from=b --chown=1:1 /x /y\nHEALTHCHECK --interval=5s CMD ["true"]\n'
    )
    assert [(i.keyword, i.flags, i.args) for i in parsed] == [
        ('FROM', {}, 'a AS b'),
        ('RUN', {}, 'one && two'),
        ('COPY', {'from': 'b', 'chown': '1:1'}, '/x /y'),
        ('HEALTHCHECK', {'interval': '5s'}, 'CMD ["true"]'),
    ]


@pytest.fixture(scope='module')
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((DEPLOY / 'Dockerfile').read_text())


@pytest.fixture(scope='module')
def final_stage(dockerfile: list[Instruction]) -> list[Instruction]:
    return stages(dockerfile)[-1]


def final_env(dockerfile: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stages(dockerfile)[-1]:
        if instruction.keyword == 'ENV':
            env.update(env_pairs(instruction))
    return env


BIN = Path(sys.executable).parent


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / 'hadolint'), str(path)], capture_output=True, text=True, timeout=60)


def test_hadolint_passes_the_dockerfile_and_rejects_a_broken_one(tmp_path: Path) -> None:
    ran = hadolint(DEPLOY / 'Dockerfile')
    assert ran.returncode == 0, ran.stdout + ran.stderr
    broken = tmp_path / 'Dockerfile'
    broken.write_text((DEPLOY / 'Dockerfile').read_text().replace('WORKDIR /data', 'WORKDIR data\nFORM x'))
    assert hadolint(broken).returncode != 0


def test_dockerfile_is_multi_stage_on_python_slim(dockerfile: list[Instruction]) -> None:
    froms = [i for i in dockerfile if i.keyword == 'FROM']
    assert len(froms) >= 2, 'build in one stage, run in another'
    assert froms[0].args.split()[-1] == 'build', 'name the first stage "build"'
    assert froms[-1].args.split()[0] == 'python:3.11-slim'
    build = stages(dockerfile)[0]
    assert any('pip wheel' in i.args for i in build if i.keyword == 'RUN'), 'the build stage makes a wheel'


def test_final_stage_runs_as_a_non_root_user(final_stage: list[Instruction]) -> None:
    users = [i.args for i in final_stage if i.keyword == 'USER']
    assert users, 'the final stage needs a USER'
    user = users[-1].split(':')[0]
    assert user not in ('root', '0')
    assert user == '10001', 'use the numeric uid so Kubernetes can verify runAsNonRoot'


def test_final_stage_has_no_build_tools(final_stage: list[Instruction]) -> None:
    forbidden = re.compile(r'\b(build-essential|gcc|g\+\+|clang|make|cc|pip\s+(wheel|install)|apt-get\s+install)\b')
    for instruction in final_stage:
        if instruction.keyword == 'RUN':
            assert not forbidden.search(instruction.args), f'line {instruction.line} installs build tooling'
        if instruction.keyword in ('COPY', 'ADD'):
            assert instruction.flags.get('from') == 'build', f'line {instruction.line}: copy only from the build stage'
            assert instruction.args.split() == ['/opt/venv', '/opt/venv'], 'ship the virtualenv and nothing else'


def test_entrypoint_is_the_importable_worker_module(final_stage: list[Instruction]) -> None:
    entrypoints = [i for i in final_stage if i.keyword == 'ENTRYPOINT']
    assert entrypoints, 'the final stage needs an ENTRYPOINT'
    command = entrypoints[-1].exec_form()
    assert command is not None, 'use the exec form, so Python is PID 1 and gets SIGTERM'
    assert command == ['python', '-m', 'temporal_recall.worker'], 'exec form, so Python is PID 1 and gets SIGTERM'
    module = command[2]
    assert importlib.util.find_spec(module) is not None
    assert importlib.util.find_spec(f'{module}.__main__') is not None, f'{module} must be runnable with -m'


def test_image_exposes_the_health_and_metrics_ports(dockerfile: list[Instruction]) -> None:
    settings = Settings.from_env(final_env(dockerfile))
    exposed = {
        int(port.split('/')[0]) for i in stages(dockerfile)[-1] if i.keyword == 'EXPOSE' for port in i.args.split()
    }
    assert settings.health_port is not None and settings.metrics_port is not None
    assert {settings.health_port, settings.metrics_port} <= exposed


def test_copied_sources_exist_and_are_not_ignored(dockerfile: list[Instruction]) -> None:
    allowed = {
        line[1:].strip().rstrip('/')
        for line in (DEPLOY / 'Dockerfile.dockerignore').read_text().splitlines()
        if line.startswith('!')
    }
    for instruction in dockerfile:
        if instruction.keyword == 'COPY' and 'from' not in instruction.flags:
            *sources, _destination = instruction.args.split()
            for source in sources:
                assert (REPO / source).exists(), f'line {instruction.line}: {source} is not in the repository'
                assert source.rstrip('/') in allowed, f'{source} is excluded by Dockerfile.dockerignore'


def healthcheck_command(dockerfile: list[Instruction]) -> list[str]:
    checks = [i for i in stages(dockerfile)[-1] if i.keyword == 'HEALTHCHECK']
    assert len(checks) == 1, 'the final stage needs one HEALTHCHECK'
    kind, _, command = checks[0].args.partition(' ')
    assert kind == 'CMD'
    parsed = Instruction('CMD', {}, command.strip(), checks[0].line).exec_form()
    assert parsed is not None, 'use the exec form: slim images have no curl or wget, and a shell is not needed'
    return parsed


async def run_healthcheck(command: list[str], port: int) -> int:
    assert command[:2] == ['python', '-c']
    env = {**os.environ, 'TEMPORAL_RECALL_HEALTH_PORT': str(port)}
    process = await asyncio.create_subprocess_exec(sys.executable, *command[1:], env=env)
    return await asyncio.wait_for(process.wait(), 30)


async def test_healthcheck_command_passes_against_a_live_server(dockerfile: list[Instruction]) -> None:
    command = healthcheck_command(dockerfile)
    assert '/healthz' in command[-1] and 'urllib' in command[-1]
    async with serve_health(0, host='127.0.0.1', ready=lambda: False) as port:
        assert await run_healthcheck(command, port) == 0
    assert await run_healthcheck(command, port) != 0, 'the check must fail when nothing answers'


# --- YAML -------------------------------------------------------------------------------------------


def load_yaml(path: Path) -> list[dict[str, Any]]:
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    assert documents, f'{path} is empty'
    for doc in documents:
        assert isinstance(doc, dict), f'{path}: every document must be a mapping'
    return documents


@pytest.fixture(scope='module')
def compose() -> dict[str, Any]:
    (document,) = load_yaml(DEPLOY / 'compose.yaml')
    return document


def k8s_files() -> list[Path]:
    files = sorted(K8S.glob('*.yaml'))
    assert {f.name for f in files} >= {'configmap.yaml', 'secret.yaml', 'deployment.yaml'}
    return files


@pytest.fixture(scope='module')
def k8s() -> dict[str, dict[str, Any]]:
    """Every Kubernetes object under deploy/k8s, by kind."""
    objects: dict[str, dict[str, Any]] = {}
    for path in k8s_files():
        for doc in load_yaml(path):
            assert {'apiVersion', 'kind', 'metadata'} <= set(doc), f'{path.name}: not a Kubernetes object'
            assert doc['metadata'].get('name'), f'{path.name}: {doc["kind"]} has no name'
            objects[doc['kind']] = doc
    return objects


KUBERNETES_VERSION = '1.31'
"""The oldest Kubernetes release still supported upstream when these manifests were written."""


@pytest.mark.parametrize('path', k8s_files(), ids=lambda p: p.name)
def test_k8s_manifests_match_the_kubernetes_schema(path: Path) -> None:
    for document in load_yaml(path):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_kubernetes_schema_rejects_a_misspelt_field(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = copy.deepcopy(k8s['Deployment'])
    deployment['spec']['template']['spec']['containers'][0]['readinesProbe'] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def worker_container(k8s: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (container,) = k8s['Deployment']['spec']['template']['spec']['containers']
    return container


def named_port(container: dict[str, Any], port: str | int) -> int:
    if isinstance(port, int):
        return port
    matches = [p['containerPort'] for p in container['ports'] if p.get('name') == port]
    assert matches, f'no containerPort named {port!r}'
    return matches[0]


def k8s_environment(k8s: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {**k8s['ConfigMap']['data'], **k8s['Secret']['stringData']}


def test_deployment_takes_its_environment_from_the_configmap_and_secret(k8s: dict[str, dict[str, Any]]) -> None:
    refs = worker_container(k8s)['envFrom']
    assert {'configMapRef': {'name': k8s['ConfigMap']['metadata']['name']}} in refs
    assert {'secretRef': {'name': k8s['Secret']['metadata']['name']}} in refs
    env = k8s_environment(k8s)
    assert {'TEMPORAL_ADDRESS', 'TEMPORAL_RECALL_STORE', 'TEMPORAL_RECALL_HEALTH_PORT'} <= set(env)
    assert Settings.from_env(env).agents, 'a worker without TEMPORAL_RECALL_AGENTS refuses to start'
    assert urlsplit(env['TEMPORAL_RECALL_STORE']).scheme.startswith('postgres'), 'replicas cannot share SQLite'
    assert 'TEMPORAL_RECALL_STORE' not in k8s['ConfigMap']['data'], 'the store URL has a password: Secret only'


def test_secret_values_are_placeholders(k8s: dict[str, dict[str, Any]]) -> None:
    for key, value in k8s['Secret']['stringData'].items():
        assert 'CHANGE-ME' in value, f'{key} must be an obvious placeholder'


def test_probe_and_scrape_ports_are_the_configured_ones(k8s: dict[str, dict[str, Any]]) -> None:
    container = worker_container(k8s)
    settings = Settings.from_env(k8s_environment(k8s))
    assert settings.health_port is not None, 'the ConfigMap must set TEMPORAL_RECALL_HEALTH_PORT'
    assert settings.metrics_port is not None, 'the ConfigMap must set TEMPORAL_RECALL_METRICS_PORT'
    for probe in ('readinessProbe', 'livenessProbe'):
        port = named_port(container, container[probe]['httpGet']['port'])
        assert port == settings.health_port, f'{probe} must target TEMPORAL_RECALL_HEALTH_PORT'
    assert named_port(container, 'metrics') == settings.metrics_port
    annotations = k8s['Deployment']['spec']['template']['metadata']['annotations']
    assert int(annotations['prometheus.io/port']) == settings.metrics_port
    assert annotations['prometheus.io/path'] == '/metrics'


async def test_probe_paths_are_served_by_health_server(k8s: dict[str, dict[str, Any]]) -> None:
    container = worker_container(k8s)
    liveness = container['livenessProbe']['httpGet']['path']
    readiness = container['readinessProbe']['httpGet']['path']
    polling = False
    async with serve_health(0, host='127.0.0.1', ready=lambda: polling) as port:
        assert await http_status(port, liveness) == 200
        assert await http_status(port, readiness) == 503, 'not ready before the worker polls'
        polling = True
        assert await http_status(port, readiness) == 200
        assert await http_status(port, liveness) == 200


async def http_status(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    try:
        writer.write(f'GET {path} HTTP/1.1\r\nHost: kubelet\r\n\r\n'.encode())
        await writer.drain()
        async with asyncio.timeout(5):
            status_line = await reader.readline()
            await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    return int(status_line.split()[1])


def test_grace_period_outlasts_the_longest_activity(k8s: dict[str, dict[str, Any]]) -> None:
    grace = k8s['Deployment']['spec']['template']['spec']['terminationGracePeriodSeconds']
    assert grace > LONGEST_ACTIVITY_TIMEOUT_SECONDS


def test_pod_is_locked_down(k8s: dict[str, dict[str, Any]], final_stage: list[Instruction]) -> None:
    pod = k8s['Deployment']['spec']['template']['spec']
    container = worker_container(k8s)
    assert pod['securityContext']['runAsNonRoot'] is True
    image_uid = [i.args for i in final_stage if i.keyword == 'USER'][-1].split(':')[0]
    assert str(pod['securityContext']['runAsUser']) == image_uid
    assert container['securityContext']['readOnlyRootFilesystem'] is True
    assert container['securityContext']['allowPrivilegeEscalation'] is False
    assert {'requests', 'limits'} <= set(container['resources'])
    assert {'cpu', 'memory'} <= set(container['resources']['requests'])
    assert 'memory' in container['resources']['limits']


# --- compose ----------------------------------------------------------------------------------------


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / 'check-jsonschema'), '--builtin-schema', 'vendor.compose-spec', str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_compose_file_matches_the_compose_specification(tmp_path: Path) -> None:
    ran = check_compose(DEPLOY / 'compose.yaml')
    assert ran.returncode == 0, ran.stdout + ran.stderr
    broken = tmp_path / 'compose.yaml'
    broken.write_text((DEPLOY / 'compose.yaml').read_text().replace('stop_grace_period:', 'stop_grace_periods:'))
    assert check_compose(broken).returncode != 0


def test_compose_runs_temporal_on_postgres_with_ui_store_and_workers(compose: dict[str, Any]) -> None:
    services = compose['services']
    temporal = services['temporal']
    assert temporal['image'].startswith('temporalio/auto-setup:')
    assert temporal['environment']['DB'] == 'postgres12'
    assert temporal['environment']['POSTGRES_SEEDS'] in services, (
        'POSTGRES_SEEDS must name the Temporal database service'
    )
    assert services['temporal-ui']['image'].startswith('temporalio/ui:')
    assert services['store-db']['image'].startswith('postgres:')
    assert services['store-db'] is not services[temporal['environment']['POSTGRES_SEEDS']], 'use a separate store'


def test_compose_worker_is_built_from_the_dockerfile_and_replicated(compose: dict[str, Any]) -> None:
    worker = compose['services']['worker']
    context = (DEPLOY / worker['build']['context']).resolve()
    assert (context / worker['build']['dockerfile']).resolve() == (DEPLOY / 'Dockerfile').resolve()
    assert context == REPO, 'the Dockerfile COPYs paths relative to the repository root'
    assert worker['deploy']['replicas'] >= 2
    assert 'container_name' not in worker and 'ports' not in worker, 'replicas would collide on names and ports'
    assert {'path': '.env', 'required': False} in worker['env_file']


def test_compose_dependencies_wait_for_healthchecks(compose: dict[str, Any]) -> None:
    services = compose['services']
    for name, service in services.items():
        for dependency, condition in service.get('depends_on', {}).items():
            assert condition == {'condition': 'service_healthy'}, f'{name} must wait for {dependency} to be healthy'
            assert 'healthcheck' in services[dependency], f'{dependency} needs a healthcheck for {name} to wait on'
    assert set(services['worker']['depends_on']) == {'temporal', 'store-db'}


def test_compose_worker_points_at_the_compose_services(compose: dict[str, Any], dockerfile: list[Instruction]) -> None:
    services = compose['services']
    env = services['worker']['environment']
    assert env['TEMPORAL_ADDRESS'].split(':')[0] in services
    assert env['TEMPORAL_RECALL_AGENTS'], 'a worker without TEMPORAL_RECALL_AGENTS refuses to start'
    store = urlsplit(env['TEMPORAL_RECALL_STORE'])
    assert store.scheme.startswith('postgres'), 'replicas cannot share SQLite'
    assert store.hostname in services
    assert '${STORE_DB_PASSWORD' in env['TEMPORAL_RECALL_STORE']
    assert services['store-db']['environment']['POSTGRES_PASSWORD'].startswith('${STORE_DB_PASSWORD')
    for port in ('TEMPORAL_RECALL_HEALTH_PORT', 'TEMPORAL_RECALL_METRICS_PORT'):
        assert env[port] == final_env(dockerfile)[port], f'{port} differs between compose.yaml and the image'
    grace = services['worker']['stop_grace_period']
    assert grace.endswith('s') and int(grace[:-1]) > LONGEST_ACTIVITY_TIMEOUT_SECONDS


# --- environment variables --------------------------------------------------------------------------

INTERPOLATION = re.compile(r'(?<!\$)\$\{?([A-Za-z_][A-Za-z0-9_]*)')
ASSIGNMENT = re.compile(r'^#?\s*([A-Za-z_][A-Za-z0-9_]*)=', re.MULTILINE)


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


@dataclass
class References:
    names: dict[str, set[str]] = field(default_factory=dict)

    def add(self, name: str, where: str) -> None:
        self.names.setdefault(name, set()).add(where)


def compose_references(compose: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(variables substituted with ${...}, variables set in some service's environment)."""
    substituted = {name for text in strings(compose) for name in INTERPOLATION.findall(text)}
    environment: set[str] = set()
    for service in compose['services'].values():
        env = service.get('environment', {})
        environment |= set(env) if isinstance(env, dict) else {item.split('=', 1)[0] for item in env}
    return substituted, environment


def env_example() -> dict[str, str]:
    """Keys assigned in .env.example, including commented-out placeholders such as `# KEY=`."""
    text = (DEPLOY / '.env.example').read_text()
    keys = ASSIGNMENT.findall(text)
    assert len(keys) == len(set(keys)), '.env.example assigns a variable twice'
    return dict.fromkeys(keys, '')


def all_references(
    compose: dict[str, Any], k8s: dict[str, dict[str, Any]], dockerfile: list[Instruction]
) -> References:
    refs = References()
    substituted, environment = compose_references(compose)
    for name in substituted | environment:
        refs.add(name, 'compose.yaml')
    for name in k8s_environment(k8s):
        refs.add(name, 'k8s')
    for entry in worker_container(k8s).get('env', []):
        refs.add(entry['name'], 'k8s/deployment.yaml')
    for name in env_example():
        refs.add(name, '.env.example')
    for instruction in dockerfile:
        if instruction.keyword == 'ENV':
            for name in env_pairs(instruction):
                refs.add(name, 'Dockerfile')
        for name in INTERPOLATION.findall(instruction.args):
            refs.add(name, 'Dockerfile')
    return refs


def is_product_variable(name: str) -> bool:
    return name.startswith('TEMPORAL_RECALL_') or name in ('TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE')


def test_every_product_variable_used_by_deploy_files_is_documented(
    compose: dict[str, Any], k8s: dict[str, dict[str, Any]], dockerfile: list[Instruction]
) -> None:
    refs = all_references(compose, k8s, dockerfile)
    product = {name for name in refs.names if is_product_variable(name)}
    assert product, 'the scan found no variables at all; the parser is broken'
    undocumented = {name: sorted(refs.names[name]) for name in product - set(ENVIRONMENT_VARIABLES)}
    assert not undocumented, f'document these in settings.ENVIRONMENT_VARIABLES (or stop using them): {undocumented}'


def test_env_example_lists_every_setting() -> None:
    missing = set(ENVIRONMENT_VARIABLES) - set(env_example())
    assert not missing, f'add to deploy/.env.example: {sorted(missing)}'


def test_env_example_lists_every_compose_substitution(compose: dict[str, Any]) -> None:
    substituted, _ = compose_references(compose)
    missing = substituted - set(env_example())
    assert not missing, f'compose.yaml substitutes variables that deploy/.env.example does not document: {missing}'


def test_k8s_sets_only_documented_settings(k8s: dict[str, dict[str, Any]]) -> None:
    unknown = {name for name in k8s['ConfigMap']['data'] if name not in ENVIRONMENT_VARIABLES}
    assert not unknown, f'the ConfigMap sets variables temporal-recall never reads: {unknown}'


# --- the walkthrough ----------------------------------------------------------------------------------


def test_readme_walks_from_compose_up_to_search() -> None:
    text = (DEPLOY / 'README.md').read_text()
    for expected in (
        'docker compose -f deploy/compose.yaml up',
        'RunPromptWorkflow',
        'RunPromptInput(prompt=',
        "task_queue='temporal-recall'",
        'recall conversations',
        'recall show ',
        'recall search ',
        'pytest tests/replay',
        'set-current-version',
        'back up',
    ):
        assert expected in text, f'deploy/README.md should cover {expected!r}'
    for number, block in enumerate(re.findall(r'```python\n(.*?)```', text, re.DOTALL), 1):
        compile(block, f'deploy/README.md python block {number}', 'exec')
