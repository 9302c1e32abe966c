"""The PostgreSQL store: one shared store for a team's machines (``LOOPSTATE_STORE=postgresql://...``).

Imported only when a ``postgresql://`` store URL is in use, so the local JSONL store (the
default) never loads psycopg. ``schema`` creates and versions the tables and the append
function; ``store`` appends and reads; ``follow`` turns NOTIFY into caught-up events,
reconnecting and pulling after the last sequence it saw, so a lost notification loses nothing.
docs/storage.md, "PostgreSQL", is the reference.
"""
