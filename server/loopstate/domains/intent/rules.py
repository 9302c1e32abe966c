"""Field rules of the claims ledger: claims, source references, ids, labels.

Every function here validates one input and returns the exact value that goes
into an event payload, or raises a LoopstateError naming the field and the rule.
Text is credential-redacted before it is measured, hashed or stored.
"""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

from loopstate_protocol.errors import ErrorCode
from loopstate_protocol.intent import ACTORS as ROLES
from loopstate_protocol.intent import FACETS, SCOPES, STATUSES, ClaimInput, SourceInput

from loopstate.core import canonical
from loopstate.core.clock import format_time, parse_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context
from loopstate.domains.intent.records import ACTOR_SOURCES, LEGAL_STATUSES, MAX_EXCERPT, MAX_LABEL, MAX_STATEMENT
from loopstate.domains.intent.wording import article, nearest, op


def redact(text: str) -> Any:
    """core.redaction's redact, imported on first use: its patterns are the largest import of this
    package, and a read (a hook's context, `intent show`) never redacts anything."""
    from loopstate.core.redaction import redact as run

    return run(text)


def contains_secret(text: str) -> bool:
    from loopstate.core.redaction import contains_secret as run

    return run(text)


MAX_SOURCE_TEXT = 1 << 20
MAX_OPAQUE_ID = 200

# The patterns below are only used on what is about to be stored: each is kept as its source and
# compiled at first use (re.compile caches it for the process), so a read never pays for them.

# A path to a host transcript or session log (Codex rollouts, Claude projects, any *.jsonl log):
# a token that starts like a path (at its start, or after "(" or "=") and names such a file.
_PATH_START = r"(?i)~|\.{0,2}/|[a-z]:\\|\\\\"
_TRANSCRIPT_MARK = (
    r"(?i)\.jsonl\b|[/\\]\.codex[/\\]sessions\b|[/\\]\.claude[/\\]projects\b"
    r"|transcript[^/\\]{0,200}?\.(?:jsonl?|txt|log|md)\b"
)
_TOKEN_SPLIT = r"[\s\"']+"
# Longest raw text looked at before redaction: a statement is at most 500
# characters after redaction; anything this long is a pasted document, not a claim.
MAX_RAW_TEXT = 32 * 1024


def has_transcript_path(text: str) -> bool:
    """Linear in the text: each token is scanned from its first path-like start only.

    A later start inside the same token sees a suffix of what the first one
    sees, so it could not find a marker the first one missed.
    """
    path_start, transcript_mark = re.compile(_PATH_START), re.compile(_TRANSCRIPT_MARK)
    for token in re.split(_TOKEN_SPLIT, text):
        starts = [0] + [i + 1 for i, c in enumerate(token) if c in "(="]
        for start in starts:
            if path_start.match(token, start):
                if transcript_mark.search(token, start):
                    return True
                break
    return False


# Markers of a pasted conversation: several lines opening with a speaker. Only
# blanks within the line are skipped (\s would run across blank lines from every
# line start: quadratic on text of many empty lines).
_SPEAKER_LINE = r"(?im)^[ \t]*(?:user|assistant|human|system|ai|tool)[ \t]*:"
# Keys that only appear in hook tool payloads.
_TOOL_PAYLOAD_KEYS = r"\"(?:tool_input|tool_response|tool_use_id|tool_name|transcript_path|hook_event_name)\"\s*:"
MAX_STATEMENT_LINES = 6


def refuse(message: str, *, field: str, code: ErrorCode = ErrorCode.VALIDATION_FAILED, **details: Any) -> LoopstateError:
    return LoopstateError(code, message, field=field, **details)


def rule(message: str, **details: Any) -> LoopstateError:
    return LoopstateError(ErrorCode.RULE_VIOLATION, message, **details)


def check_uuid(value: Any, field: str) -> str:
    """A canonical lower-case UUID string."""
    try:
        parsed = uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or str(parsed) != value.lower():
        raise refuse(f"{field}: {value!r} is not a UUID; pass the id the server returned", field=field)
    return str(parsed)


def _refuse_carriers(text: str, field: str) -> None:
    """Full prompts, transcripts, transcript paths and tool payloads never enter the ledger."""
    if len(text) > MAX_RAW_TEXT:
        raise refuse(
            f"{field}: is {len(text)} characters; a claim is at most {MAX_STATEMENT} characters after redaction "
            "(record atomic statements, never a full prompt or document)",
            field=field, length=len(text),
        )
    if has_transcript_path(text):
        raise refuse(f"{field}: looks like a transcript or session-log path; transcript paths are never stored", field=field)
    if re.search(_TOOL_PAYLOAD_KEYS, text) or _looks_like_json_payload(text):
        raise refuse(f"{field}: looks like a tool payload (JSON); record an atomic statement instead", field=field)
    if len(re.findall(_SPEAKER_LINE, text)) >= 2:
        raise refuse(f"{field}: looks like a pasted conversation; record one atomic claim per statement", field=field)


def _looks_like_json_payload(text: str) -> bool:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return False
    try:
        value = canonical.decode(stripped)
    except Exception:
        return False
    return isinstance(value, (dict, list)) and len(value) > 0


def statement(text: Any, field: str = "statement") -> str:
    """Redacted, stripped, 1-500 characters, one atomic statement."""
    if not isinstance(text, str):
        raise refuse(f"{field}: expected a string", field=field)
    _refuse_carriers(text, field)
    cleaned = redact(text).text.strip()
    if not cleaned:
        raise refuse(f"{field}: is empty; give 1-{MAX_STATEMENT} characters of text", field=field)
    if len(cleaned) > MAX_STATEMENT:
        raise refuse(
            f"{field}: is {len(cleaned)} characters after redaction; at most {MAX_STATEMENT} (split it into atomic claims, "
            "never a full prompt)",
            field=field, length=len(cleaned),
        )
    if cleaned.count("\n") >= MAX_STATEMENT_LINES:
        raise refuse(f"{field}: has more than {MAX_STATEMENT_LINES} lines; record atomic claims, not a full prompt", field=field)
    return cleaned


def label(text: Any) -> str | None:
    if text is None:
        return None
    if isinstance(text, str) and not text.strip():
        raise refuse(f"label: is empty; give one line of 1-{MAX_LABEL} characters, or no label", field="label")
    value = statement(text, "label")
    if len(value) > MAX_LABEL or "\n" in value:
        raise refuse(f"label: one line of at most {MAX_LABEL} characters after redaction", field="label")
    return value


def opaque_id(value: Any, field: str, *, stored: bool = True) -> str:
    """An opaque host or plugin event id: short, printable, no path and, when ``stored``, no secret.

    An id that is only hashed to find something (a host session's control
    file, on every hook call) is never stored: it skips the credential
    patterns, whose first use compiles them all (~2 ms of a hook process).
    """
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_OPAQUE_ID or not value.isprintable() or any(c.isspace() for c in value):
        raise refuse(f"{field}: an opaque event id is 1-{MAX_OPAQUE_ID} printable characters without spaces", field=field)
    if "/" in value or "\\" in value:
        raise refuse(f"{field}: looks like a path; transcript paths are never stored, pass the host's event id", field=field)
    if stored and contains_secret(value):
        raise refuse(f"{field}: contains a credential; pass the host's opaque event id", field=field)
    return value


def text_hash(text: str) -> str:
    """SHA-256 of source text after redaction: neither the raw text nor a secret's digest is kept."""
    return canonical.sha256_hex(("intent-source-v1\0" + redact(text).text).encode("utf-8"))


def id_hash(event_id: str) -> str:
    return canonical.sha256_hex(("intent-source-id-v1\0" + event_id).encode("utf-8"))


def source_ref(source: SourceInput | None, actor: str, ctx: Context, *, allow_import: bool = False) -> dict[str, Any]:
    """The minimal source object: kind, event_id and/or sha256, optional excerpt.

    Without a source the server creates one: the actor's own kind with a fresh
    provenance id. A hook observation with a host event id keeps that id as
    its sole identity; without one, only a hash of the redacted text remains.
    """
    if source is None:
        kind = ACTOR_SOURCES[actor][0]
        return {"kind": kind, "event_id": ctx.new_id()}
    if source.kind == "explicit_import" and not allow_import:
        raise rule("source.kind explicit_import is set by the server on import; it cannot be claimed directly", field="source.kind")
    if not allow_import and source.kind not in ACTOR_SOURCES[actor]:
        raise rule(
            f"{article(actor)} actor cannot cite {article(source.kind)} source (allowed: {', '.join(ACTOR_SOURCES[actor])}); "
            "a tool result is only ever evidence, a user event only comes from the user",
            field="source.kind", actor=actor, kind=source.kind,
        )
    ref: dict[str, Any] = {"kind": source.kind}
    if source.event_id is not None:
        ref["event_id"] = opaque_id(source.event_id, "source.event_id")
    if source.text is not None:
        if not isinstance(source.text, str) or len(source.text) > MAX_SOURCE_TEXT:
            raise refuse(f"source.text: at most {MAX_SOURCE_TEXT} characters (it is hashed, never stored)", field="source.text")
        whole = source.text.strip()
        if not whole:
            raise refuse("source.text: is empty; give the source text to hash, or the host's event_id", field="source.text")
        if len(whole.split()) == 1 and has_transcript_path(whole):
            raise refuse("source.text: is a transcript path; transcript paths are never read or stored", field="source.text")
        if not (source.via_hook and "event_id" in ref):
            ref["sha256"] = text_hash(source.text)
    if "event_id" not in ref and "sha256" not in ref:
        raise refuse("source: give event_id or text (at least one identity is required)", field="source")
    if source.via_hook and "event_id" in ref:
        ref["sha256"] = id_hash(ref["event_id"])
    if source.excerpt is not None and (not source.via_hook or source.keep_excerpt):
        ref["excerpt"] = excerpt(source.excerpt)
    return ref


def excerpt(text: Any) -> str:
    if not isinstance(text, str):
        raise refuse("source.excerpt: expected a string", field="source.excerpt")
    _refuse_carriers(text, "source.excerpt")
    cleaned = redact(text).text.strip()
    if not cleaned or len(cleaned) > MAX_EXCERPT:
        raise refuse(
            f"source.excerpt: is {len(cleaned)} characters after redaction; an excerpt is 1-{MAX_EXCERPT} characters",
            field="source.excerpt",
        )
    return cleaned


def direct_user(actor: str, ref: dict[str, Any]) -> bool:
    """A direct user event: the user acting, citing the user's own event."""
    return actor == "user" and ref.get("kind") == "user_event"


# RFC 3339 date-time in UTC: full date, "T", full time, optional fraction, "Z".
_RFC3339_UTC = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z"


def utc(value: Any, field: str) -> str:
    """An RFC 3339 UTC timestamp (``2026-01-01T09:30:00Z``), normalised; any other form is refused."""
    if isinstance(value, str) and not re.fullmatch(_RFC3339_UTC, value) and value.endswith("Z"):
        raise refuse(
            f"{field}: {value!r} is not an RFC 3339 UTC timestamp; write YYYY-MM-DDTHH:MM:SSZ, e.g. 2026-01-01T09:30:00Z",
            field=field,
        )
    if isinstance(value, str) and re.fullmatch(_RFC3339_UTC, value) and "." in value:
        # Python parses at most microseconds; extra digits are cut, not rounded.
        head, frac = value[:-1].split(".")
        value = f"{head}.{frac[:6]}Z"
    return format_time(parse_time(value, field=field))


def instant(value: str) -> Any:
    """A stored timestamp as a datetime, for ordering (text order is wrong when fractions differ)."""
    return parse_time(value, field="timestamp")


def facets(values: Any) -> list[str]:
    if not isinstance(values, list) or not values:
        raise refuse(f"facets: give one or more of {', '.join(FACETS)}", field="facets")
    for value in values:
        if value not in FACETS:
            raise refuse(f"facets: {value!r} is not a facet{nearest(str(value), FACETS)}; use {', '.join(FACETS)}",
                         field="facets", value=value)
    if len(set(values)) != len(values):
        raise refuse("facets: each facet may appear once", field="facets")
    return list(values)


# [FACET:]STATEMENT as the user types a claim (`--claim`, a hook's `/intent remember`): the text
# before the first colon names a facet when it is one identifier-like word (letters, digits,
# '_' or '-', no spaces). "Fix bug: the parser" has no such prefix and is an outcome;
# "hard_contraint:Keep API" is a facet attempt, refused rather than guessed.
FACET_PREFIX = r"(?s)(?P<facet>[A-Za-z_][A-Za-z0-9_-]*):(?P<statement>.*)"


def split_facet(text: str) -> tuple[str, str]:
    """A typed ``[FACET:]STATEMENT`` as (facet, statement); a prefix that is no facet is refused with the nearest."""
    match = re.fullmatch(FACET_PREFIX, text)
    if match is None:
        return "outcome", text
    facets([match["facet"]])
    return match["facet"], match["statement"]


def confidence_for(status: str, value: Any) -> float | None:
    """Required, 0-1, only for inferred claims; absent for every other status."""
    if status == "inferred":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
            raise refuse("confidence: an inferred claim needs a confidence between 0 and 1", field="confidence")
        return float(value)
    if value is not None:
        raise refuse(f"confidence: only inferred claims carry a confidence; remove it for {status!r}", field="confidence")
    return None


def status_for_role(role: str, status: str, ref_kind: str | None) -> None:
    if role not in ROLES:
        raise refuse(f"role: {role!r} is not one of {', '.join(ROLES)}", field="role")
    if status not in STATUSES:
        raise refuse(f"epistemic_status: {status!r} is not one of {', '.join(STATUSES)}", field="epistemic_status")
    if status not in LEGAL_STATUSES[role]:
        raise rule(
            f"{article(role)} claim cannot be {status!r} (allowed: {', '.join(LEGAL_STATUSES[role])}); "
            "explicit records only what the user said",
            field="epistemic_status", role=role, status=status,
        )
    if ref_kind in ("tool_result", "external_evidence") and status != "evidence":
        raise rule(
            f"a claim from {article(ref_kind)} source is only ever evidence (or a candidate), never {status!r}",
            field="epistemic_status", kind=ref_kind,
        )


def claim(
    given: ClaimInput, *, actor: str, ref: dict[str, Any], ctx: Context, claim_id: str, supersedes: list[str] | None = None,
) -> dict[str, Any]:
    """The claim payload of the claim table, with every field rule applied."""
    if given.role != actor:
        raise rule(
            f"role {given.role!r} differs from the acting {actor!r}; a claim's role is who made it",
            field="role", role=given.role, actor=actor,
        )
    status_for_role(given.role, given.epistemic_status, ref.get("kind"))
    if given.scope not in SCOPES:
        raise refuse(f"scope: {given.scope!r} is not one of {', '.join(SCOPES)}", field="scope")
    if given.scope == "long_term" and not (direct_user(actor, ref) and given.epistemic_status == "explicit"):
        raise rule(
            "scope long_term needs a direct user declaration (explicit, from the user's own event); "
            f"repeated signals become candidates first ({op('intent.candidate_add')}) and only the user's confirmation promotes them",
            field="scope",
        )
    payload: dict[str, Any] = {
        "claim_id": claim_id,
        "statement": statement(given.statement),
        "role": given.role,
        "epistemic_status": given.epistemic_status,
        "source_ref": ref,
        "scope": given.scope,
        "valid_from": utc(given.valid_from, "valid_from") if given.valid_from is not None else format_time(ctx.now),
        "last_confirmed": utc(given.last_confirmed, "last_confirmed") if given.last_confirmed is not None else None,
        "supersedes": list(supersedes or []),
        "facets": facets(given.facets),
    }
    conf = confidence_for(given.epistemic_status, given.confidence)
    if conf is not None:
        payload["confidence"] = conf
    return payload


def fingerprint_params(command: Any) -> Any:
    """Command parameters with every string credential-redacted, for the request fingerprint.

    The fingerprint is a digest of the request; computing it over redacted text
    keeps even a digest of a secret out of the ledger.
    """
    import msgspec

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value).text
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return clean(msgspec.to_builtins(command))


def check_command(command: Any) -> None:
    """Re-validate a command against its own type (Literal values, field types).

    The wire decoder already does this; a command built in Python (a test, an
    embedding program) is not checked by msgspec at construction, so the domain
    checks it before trusting any field.
    """
    import msgspec

    try:
        msgspec.convert(msgspec.to_builtins(command), type(command))
    except msgspec.ValidationError as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"{type(command).__struct_config__.tag}: {exc}") from None
