"""The PostgreSQL store: one shared store for a team's machines (``LOOPSTATE_STORE=postgresql://...``).

Imported only when a ``postgresql://`` store URL is in use, so the local JSONL store (the
default) never loads psycopg. ``schema``: the tables and the one append function, created
and versioned; ``events``: connections and statements; ``store``: the contract's ``Store``;
``ledger``: its ``StreamLedger`` (a mutation is a transaction holding the stream's lock);
``feed``: LISTEN/NOTIFY as the change feed; ``rows``: rows as checked records.
docs/storage.md, "PostgreSQL", is the reference.
"""

from loopstate.core.postgres.store import PostgresStore, open_store

__all__ = ["PostgresStore", "open_store"]
