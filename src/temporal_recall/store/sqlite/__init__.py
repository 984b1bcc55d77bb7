"""The SQLite driver: its dialect, its connection (one thread per database) as a `Backend`, its
opener and migration, and `SqliteConversationStore`.

Imports `sql`, `protocol` and the engine (`_engine`, `_migrate`); no engine module imports it.
"""
