"""The store's ``resources/list`` for the early answerer (mcpserver/early.py), without the SDK.

Claude Code 2.1 counts a server's tools only once its ``tools/list``,
``prompts/list`` and ``resources/list`` are all answered, and builds its first
model request without a server that is still pending. The two static lists come
from the recorded table; this list is the store's, so it is computed here, in the
early answerer's own thread, with the same reads the SDK's handler makes
(``resources.listing``) for the project the SDK would choose: a 2026-07-28
connection cannot be asked for roots, so the project is ``--root``'s, else the
one found from the current directory (``roots.choose`` with no host root).

The answer is written in the SDK's own JSON (the envelope of the same version's
``prompts/list`` answer, keys sorted, compact, UTF-8 as is), so the SDK's answer
to the same request, dropped on its way out, compares equal (``stdio.Noting``).
"""

from __future__ import annotations

import json
import os

PROMPTS_LIST = "prompts/list"
EMPTY_PROMPTS = '"prompts":[]'


def envelope_of(prompts_answer: str) -> str | None:
    """The recorded ``prompts/list`` result with its empty list as the place for the resources, or None when
    that answer is not the plain shape this relies on (then the SDK answers)."""
    return prompts_answer if prompts_answer.count(EMPTY_PROMPTS) == 1 else None


def result_text(envelope: str, explicit_root: str | None, cwd: str | None = None) -> str:
    """The ``result`` text of this project's ``resources/list``; raises what the store or the root raises."""
    from loopstate.mcpserver import resources, roots
    from loopstate.service.engine import Service

    root = roots.choose(sandbox=None, client_root=None, explicit=explicit_root, cwd=cwd or os.getcwd()).root
    # A service of this thread's own: the SDK's (cli/mcp.py) is made later and used from its worker thread.
    found = resources.listing(Service(), root)
    listed = [{"mimeType": "application/json", "name": name, "uri": view.uri} for view, name in found]
    text = json.dumps(listed, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return envelope.replace(EMPTY_PROMPTS, '"resources":' + text, 1)
