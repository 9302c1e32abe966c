"""The goals domain (being built: see its issue)."""

DOMAIN = None
