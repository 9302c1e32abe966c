"""Store URLs: which ones mean PostgreSQL, and how to name one in a message without its password."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` selects the PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return urlsplit(url).scheme.lower() in SCHEMES if "://" in url else False


def redact(url: str) -> str:
    """The URL with any password taken out (in the user part or a ``password=`` parameter),
    safe to print in an error, a log line or ``loopstate doctor``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}" if ":" in userinfo else f"{user}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if k.lower() == "password" else v) for k, v in pairs], safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
