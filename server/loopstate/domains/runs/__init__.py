"""The runs domain (being built: see its issue)."""

DOMAIN = None
