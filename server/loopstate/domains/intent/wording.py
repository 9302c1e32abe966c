"""How the intent domain's refusals are worded, whichever front door shows them.

A refusal that names the operation that fixes it names it twice: the CLI verb
(what a person types) and the wire method in parentheses (what a harness
sends), e.g. "start it with `loopstate intent start` (intent.task_start)". The
messages travel unchanged through every front door, so neither has to rewrite
them; tests/intent/test_intent_wording.py checks each verb against the CLI's
parser and each method against the protocol, so the table cannot go stale.

``article`` picks "a" or "an" for the vocabulary words messages put after one
(actors, source kinds, roles): "an" before a vowel sound, so "an 'agent'" but
"a 'user'" and "a 'user_event'".
"""

from __future__ import annotations

from typing import Iterable

CLI_VERBS = {
    "intent.task_start": "loopstate intent start",
    "intent.claim_add": "loopstate intent add",
    "intent.claim_confirm": "loopstate intent confirm",
    "intent.candidate_add": "loopstate intent candidate",
    "intent.private_recover": "loopstate intent recover",
    "intent.snapshot": "loopstate intent show",
    "intent.audit": "loopstate intent audit",
    "intent.candidates": "loopstate intent candidates",
}


def op(method: str) -> str:
    """The operation ``method`` as every front door's user knows it: CLI verb, then wire method."""
    return f"`{CLI_VERBS[method]}` ({method})"


def article(word: str) -> str:
    """'a' or 'an' for a vocabulary word (and the word itself), by its first sound."""
    lowered = word.lower()
    vowel_sound = lowered[:1] in ("a", "e", "i", "o") or (lowered.startswith("un") and not lowered.startswith("uni"))
    return f"{'an' if vowel_sound else 'a'} {word!r}"


def nearest(value: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the choice closest to ``value`` ignoring case, or ''.

    difflib is imported here, for a refusal only: every read imports this module."""
    import difflib

    choices = list(choices)
    by_lower = {choice.lower(): choice for choice in choices}
    match = difflib.get_close_matches(value.lower().replace("-", "_"), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[match[0]]!r}?)" if match else ""
