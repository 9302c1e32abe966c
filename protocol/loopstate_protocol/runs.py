"""Commands, queries and results of the runs domain (being built: see its issue)."""

COMMANDS: tuple = ()
QUERIES: tuple = ()
