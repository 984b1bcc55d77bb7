from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ._support import Filled, fill_store


@pytest.fixture(scope='module')
async def filled_template(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    """One filled store per module; tests that change it work on a copy (`filled`)."""
    return await fill_store(tmp_path_factory.mktemp('cli') / 'template.db')


@pytest.fixture
def filled(filled_template: Filled, tmp_path: Path) -> Filled:
    path = tmp_path / 'recall.db'
    shutil.copyfile(filled_template.path, path)
    for suffix in ('-wal', '-shm'):  # normally folded into the file when the store closed
        sidecar = Path(f'{filled_template.path}{suffix}')
        if sidecar.exists():
            shutil.copyfile(sidecar, f'{path}{suffix}')
    return Filled(path=path, run_ids=filled_template.run_ids)
