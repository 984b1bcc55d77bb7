"""The index analysis process a rebuild starts (`index._ahead`): `python -m temporal_recall.store.index._analyst`.

It reads batches of stored messages (a pickled `{entry_key: message}`) from its standard input and
writes each batch's documents (`_bulk.Analysed`, or `None` if the batch failed) to its standard
output, until its input ends. It touches no database.
"""

from __future__ import annotations

import pickle
import sys

from ._ahead import analysis_or_none


def main() -> None:
    into, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            messages = pickle.load(into)  # From the rebuild that started this process.
        except EOFError:
            return
        pickle.dump(analysis_or_none(messages), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


if __name__ == '__main__':
    main()
