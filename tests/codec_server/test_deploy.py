"""The codec server in deploy/: Compose and Kubernetes run `recall codec-server` with tokens from a secret."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from temporal_recall.api import load_tokens
from temporal_recall.cli import app

DEPLOY = Path(__file__).resolve().parents[2] / 'deploy'


def _parsed(command: list[str]) -> Any:
    assert command[:2] == ['recall', 'codec-server'], command
    _, bound, _ = app.parse_args(command[1:], exit_on_error=False, print_error=False)
    defaults = {name: parameter.default for name, parameter in bound.signature.parameters.items()}
    values = {**defaults, **bound.arguments}
    return SimpleNamespace(
        tokens=str(values['tokens']),
        host=values['host'],
        port=values['port'],
        allow_origin=list(values['allow_origin']),
        store=values['store'],
    )


def test_compose_runs_the_codec_server_with_a_tokens_secret():
    compose = yaml.safe_load((DEPLOY / 'compose.yaml').read_text())
    service = compose['services']['codec-server']
    args = _parsed(service['entrypoint'])
    assert args.tokens == '/run/secrets/' + service['secrets'][0]
    assert compose['secrets'][service['secrets'][0]]['file'] == './codec-tokens.json'
    assert args.host == '0.0.0.0'
    assert service['ports'] == [f'${{HOST_CODEC_PORT:-8088}}:{args.port}']
    assert args.allow_origin == ['http://localhost:${HOST_UI_PORT:-8233}']  # the UI service's published port
    assert (
        service['environment']['TEMPORAL_RECALL_STORE']
        == compose['services']['worker']['environment']['TEMPORAL_RECALL_STORE']
    )
    ui = compose['services']['temporal-ui']['environment']
    assert ui['TEMPORAL_CODEC_ENDPOINT'] == 'http://localhost:${HOST_CODEC_PORT:-8088}'
    assert ui['TEMPORAL_CODEC_INCLUDE_CREDENTIALS'] == 'true'
    # The example tokens file has the shape the server loads (placeholders, never real tokens).
    example = json.loads((DEPLOY / 'codec-tokens.example.json').read_text())
    assert all(token.startswith('CHANGE-ME') for token in example)
    assert re.search(r'^deploy/codec-tokens\.json$', (DEPLOY.parent / '.gitignore').read_text(), re.MULTILINE)


def test_kubernetes_runs_the_codec_server_with_tokens_from_a_secret(tmp_path: Path):
    objects = {
        doc['kind']: doc
        for path in sorted((DEPLOY / 'k8s' / 'codec-server').glob('*.yaml'))
        for doc in yaml.safe_load_all(path.read_text())
    }
    pod = objects['Deployment']['spec']['template']['spec']
    (container,) = pod['containers']
    args = _parsed(container['command'])
    (mount,) = container['volumeMounts']
    (volume,) = pod['volumes']
    assert mount['name'] == volume['name']
    secret = objects['Secret']
    assert volume['secret']['secretName'] == secret['metadata']['name']
    assert args.tokens == f'{mount["mountPath"]}/tokens.json'
    (tokens_file,) = secret['stringData']
    (tmp_path / tokens_file).write_text(secret['stringData'][tokens_file])
    assert load_tokens(tmp_path / tokens_file)  # the example Secret is a loadable tokens file
    store = next(env for env in container['env'] if env['name'] == 'TEMPORAL_RECALL_STORE')
    assert store['valueFrom']['secretKeyRef']['name'] == 'temporal-recall'  # the workers' Secret
    (port,) = container['ports']
    assert port['containerPort'] == args.port
    assert objects['Service']['spec']['ports'][0]['targetPort'] == port['name']
    assert objects['Service']['spec']['selector'] == objects['Deployment']['spec']['selector']['matchLabels']
    assert args.allow_origin, 'the UI origin must be allowed for CORS'
