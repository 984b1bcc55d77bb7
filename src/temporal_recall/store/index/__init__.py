"""The BM25 index over the log: documents and per-tenant counts, a conversation's membership, the
search reads, where a hit was said and its context.

Imports `sql`, `postings` and `protocol`; never `log` (the log calls the index, not the other way).
See docs/design/store.md.
"""
