"""A store URL as a message may show it: every password left out.

Kept apart from ``core/stores.py`` (which picks a store by its URL) so that
whatever names a URL in a message (the store file's checks, the PostgreSQL
store, doctor) can hide its password without importing the factory.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

SECRET_PARAMETERS = ("password", "sslpassword")
"""libpq connection parameters that carry a secret, which a URL's query may also hold."""


def redacted(url: str) -> str:
    """``url`` with every password left out (``***``), for messages, logs and reports.

    A password may stand in the user part (``user:secret@host``) or, in a libpq URL, in a
    ``password=`` or ``sslpassword=`` parameter; both are hidden. A URL with neither is
    returned exactly as given (a host-less ``postgresql:///db?host=/run`` keeps its ``//``)."""
    try:
        parts = urlsplit(url)
        password = parts.password
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "<a store URL that cannot be parsed>"
    secret_query = any(name.lower() in SECRET_PARAMETERS for name, _ in pairs)
    if password is None and not secret_query:
        return url
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    query = parts.query
    if secret_query:
        query = "&".join(f"{name}=***" if name.lower() in SECRET_PARAMETERS else f"{name}={value}" for name, value in pairs)
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))
