"""`recall check`: the store's integrity rules, written once for both backends, read in one snapshot.

Owns the findings (`_report`), the log's checks (`_log`), the index's (`_index`) and their order
(`_run`). May import `sql`, `postings` and `index`, never a driver. The rules: docs/design/store.md.
"""

from ._report import CHECK_STEPS, CheckReport, Finding, FindingKind
from ._run import run_check

__all__ = ('CHECK_STEPS', 'CheckReport', 'Finding', 'FindingKind', 'run_check')
