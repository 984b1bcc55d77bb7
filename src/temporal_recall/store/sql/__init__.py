"""The SQL base every other folder runs on: `Session` and the `Dialect` base, batches of rows, the
schema written once, and the list of migrations.

Imports nothing else from the store. See docs/design/store.md.
"""
