"""The PostgreSQL driver: its dialect, its URL options, its connection pool as a `Backend`, its
opener and migration, and `PostgresConversationStore`. asyncpg is imported only here.

Imports `sql`, `protocol` and the engine (`_engine`, `_migrate`); no engine module imports it.
"""
