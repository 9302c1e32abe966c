"""`loopstate goals` (being built: see its issue)."""


def register(sub) -> None:
    """No verbs yet."""
