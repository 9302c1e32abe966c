"""Credential redaction: recognised secrets never reach a hash, a file or a view.

Text from users, agents and tools is passed through ``redact`` before anything
is hashed or stored, so neither the secret nor a digest of it is retained. The
patterns cover private key blocks, passwords in URLs, bearer/basic
authorization values, JWTs, ``key=value`` assignments of credential-named
settings and the token formats of common providers (OpenAI, Anthropic,
GitHub, GitLab, Slack, AWS, Google, Stripe, Hugging Face, npm, PyPI,
SendGrid, Twilio, Azure storage keys, Discord). Pure functions; the intent
domain uses them now and the goals domain reuses them.
"""

from __future__ import annotations

import functools
import re

import msgspec

MARK = "[REDACTED:{kind}]"


def _source(pattern: str, flags: int = 0) -> tuple[str, int]:
    return pattern, flags


# Order matters: whole blocks and structured forms first, then bare tokens.
# Compiled on the first redaction (``_patterns``): a process that only reads never compiles them.
_SOURCES: tuple[tuple[str, tuple[str, int]], ...] = (
    ("private_key", _source(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL,
    )),
    ("url_password", _source(r"(?<=://)([^\s:/?#@]+):([^\s@/?#]+)(?=@)")),
    ("authorization", _source(r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9._~+/\-]{16,}=*)")),
    # Starts only where a run of token characters starts, so that a long run
    # with many "eyJ" in it is scanned once, not once per "eyJ" (linear time).
    ("jwt", _source(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("anthropic_key", _source(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai_key", _source(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("github_token", _source(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab_token", _source(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack_token", _source(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    ("slack_webhook", _source(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+")),
    ("aws_access_key", _source(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
    ("google_api_key", _source(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("stripe_key", _source(r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("huggingface_token", _source(r"\bhf_[A-Za-z0-9]{30,}")),
    ("npm_token", _source(r"\bnpm_[A-Za-z0-9]{36}")),
    ("pypi_token", _source(r"\bpypi-[A-Za-z0-9_-]{50,}")),
    ("sendgrid_key", _source(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    ("twilio_key", _source(r"\bSK[0-9a-fA-F]{32}\b")),
    ("discord_token", _source(r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,}")),
    ("azure_key", _source(r"(?i)(AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,})")),
    # The setting's name is matched from its credential word on (a prefix such
    # as OPENAI_ stays in the text as it is): an unbounded name prefix made
    # every word boundary rescan the rest of a long token (quadratic time).
    ("assignment", _source(
        r"(?i)((?:api[_-]?key|apikey|secret|token|passw(?:or)?d|passwd|pwd|access[_-]?key|"
        r"private[_-]?key|client[_-]?secret|auth[_-]?key|credential)s?)(\s*[:=]\s*)([\"']?)([^\s\"',;]{6,})\3"
    )),
    # "API key: 8f3a9c0d...": a two-word credential name with ":" or "=", again only
    # for a value mixing letters and digits ("the access token: required" stays).
    ("assignment", _source(
        r"(?i)\b((?:api|access|secret|auth|client|private)[ ](?:key|token|secret))(\s*[:=]\s*)()"
        r"((?=[^\s\"',;]*\d)(?=[^\s\"',;]*[A-Za-z])[^\s\"',;]{6,})"
    )),
    # "my password is hunter22": only a value mixing letters and digits, so that
    # "the token is expired" stays readable.
    ("assignment", _source(
        r"(?i)\b((?:api[_ -]?key|secret|token|password|passphrase|passwd|pwd))(\s+is\s+)()"
        r"((?=[^\s\"',;]*\d)(?=[^\s\"',;]*[A-Za-z])[^\s\"',;]{6,})"
    )),
)


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kind, re.compile(pattern, flags)) for kind, (pattern, flags) in _SOURCES)


# Forms whose replacement keeps a non-secret part (scheme user, header word, setting name).
_KEEP_PREFIX = {"url_password", "authorization", "azure_key", "assignment"}


class Redacted(msgspec.Struct, frozen=True):
    """Redacted text and what was found (kinds only, never the secret)."""

    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


def _replace(kind: str, match: re.Match[str]) -> str:
    mark = MARK.format(kind=kind)
    if kind == "url_password":
        return f"{match.group(1)}:{mark}"
    if kind in ("authorization", "azure_key"):
        return f"{match.group(1)} {mark}" if kind == "authorization" else f"{match.group(1)}={mark}"
    if kind == "assignment":
        return f"{match.group(1)}{match.group(2)}{mark}"
    return mark


def redact(text: str) -> Redacted:
    """Replace every recognised credential in ``text`` with ``[REDACTED:<kind>]``.

    Idempotent: an already redacted value is left as it is, so redacting twice
    gives the same text and reports nothing new.
    """
    found: list[str] = []
    for kind, pattern in _patterns():
        def sub(match: re.Match[str], kind: str = kind) -> str:
            secret = match.group(match.lastindex) if match.lastindex else match.group(0)
            if secret.startswith("[REDACTED:"):
                return match.group(0)
            found.append(kind)
            return _replace(kind, match)

        text = pattern.sub(sub, text)
    return Redacted(text, tuple(sorted(set(found))))


def contains_secret(text: str) -> bool:
    """True when ``redact`` would change ``text``."""
    return redact(text).changed
