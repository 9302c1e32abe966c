"""Every command and query of every domain and of the project as a whole, gathered for the tagged unions."""

from loopstate_protocol import goals, intent, project, proofs, runs

COMMANDS = (*intent.COMMANDS, *runs.COMMANDS, *goals.COMMANDS, *project.COMMANDS)
QUERIES = (*intent.QUERIES, *runs.QUERIES, *goals.QUERIES, *project.QUERIES, *proofs.QUERIES)
