"""A store URL named in a message without its password.

core/stores.py's ``redacted`` hides a password in the user part; a libpq URL may also carry
one as a ``password=`` parameter, and this hides both, so no error, log line or report of
the PostgreSQL store ever prints one.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (in the user part or a ``password=`` parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a store URL that cannot be parsed>"
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
