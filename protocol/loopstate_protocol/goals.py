"""Commands, queries and results of the goals domain (being built: see its issue)."""

COMMANDS: tuple = ()
QUERIES: tuple = ()
