"""The shipped workflows and the recall functions any workflow can await.

Importing this package pulls in no store code: workflows know only activity names and models.
"""

from ._conversation import ConversationWorkflow
from ._recall import DEFAULT_RETRY_POLICY, load_history, recall
from ._run_prompt import RunPromptWorkflow

__all__ = ('DEFAULT_RETRY_POLICY', 'ConversationWorkflow', 'RunPromptWorkflow', 'load_history', 'recall')
