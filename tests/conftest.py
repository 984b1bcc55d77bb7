from __future__ import annotations

pytest_plugins = ['temporal_recall.pytest_plugin']
