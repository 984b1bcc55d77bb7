"""The message log: conversations, entries, tenants and runs; appending a step, writing a record,
reading and deleting.

Imports `sql`, `index` (a write keeps the index in step in the same transaction) and `protocol`.
See docs/design/store.md.
"""
