"""The intent domain (being built: see its issue)."""

DOMAIN = None
