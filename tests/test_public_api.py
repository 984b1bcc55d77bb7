"""The package's public names: what the README tells users to import and catch resolves from
`temporal_recall`, and a name renamed in this release still works for one more, with a warning."""

from __future__ import annotations

import pytest

import temporal_recall
from temporal_recall import errors, models, store
from temporal_recall.search import plan


def test_the_names_the_readme_uses_are_exported() -> None:
    assert temporal_recall.PostgresConversationStore is store.PostgresConversationStore
    assert temporal_recall.LoadedHistory is models.LoadedHistory
    assert temporal_recall.Role == temporal_recall.search.Role
    for name in ('UnknownConversation', 'InvalidIdentifier', 'InvalidQuery', 'PruneRefused'):
        assert getattr(temporal_recall, name) is getattr(errors, name)
        assert name in temporal_recall.__all__


@pytest.mark.parametrize(
    ('module', 'old', 'new'),
    [
        (temporal_recall, 'search_history', 'search_index'),
        (temporal_recall, 'ConversationSummary', 'ConversationClosed'),
        (plan, 'search_history', 'search_index'),
        (models, 'ConversationSummary', 'ConversationClosed'),
    ],
)
def test_a_renamed_name_warns_and_gives_the_new_one(module: object, old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f'{old} is renamed {new}'):
        assert getattr(module, old) is getattr(module, new)
    assert old not in getattr(module, '__all__', ())
