"""loopstate: a local, append-only, hash-chained state store for AI coding-agent loops."""

__version__ = "0.1.0"
