"""The offline demo: a scripted support agent, run durably on a local Temporal dev server."""

from ._agent import agent, build_agent, lookup_order
from ._scripted_model import scripted_model

__all__ = ('agent', 'build_agent', 'lookup_order', 'scripted_model')
