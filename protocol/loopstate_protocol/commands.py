"""Every command and query of every domain, gathered for the tagged unions."""

from loopstate_protocol import goals, intent, runs

COMMANDS = (*intent.COMMANDS, *runs.COMMANDS, *goals.COMMANDS)
QUERIES = (*intent.QUERIES, *runs.QUERIES, *goals.QUERIES)
