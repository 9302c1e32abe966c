"""Commands, queries and results of the intent domain (being built: see its issue)."""

COMMANDS: tuple = ()
QUERIES: tuple = ()
