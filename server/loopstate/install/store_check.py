"""`loopstate doctor`'s store line: which store the project's streams are in, and whether it answers.

The store is chosen as every front door chooses it (core/stores.py:
``LOOPSTATE_STORE``, else the committed store file, else the local data dir),
and asked for the project's streams, the cheapest question every store
answers. A store that does not answer is a problem naming its URL (never its
password) and what to check.
"""

from __future__ import annotations

import os
from typing import Any

from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.store_file import STORE_FILE
from loopstate.core.stores import redacted as redact


def check_store(root: str) -> dict[str, Any]:
    """``{"url", "source", "answers", "streams", "problem"}`` for the project at ``root``."""
    from loopstate.core.stores import JSONL, STORE_ENV, configured_url, count_streams

    report: dict[str, Any] = {"url": None, "source": None, "answers": False, "streams": None, "problem": None}
    try:
        project = Project(root)
        url = configured_url(project.root)
    except LoopstateError as error:
        report["problem"] = error.message
        return report
    report["source"] = (STORE_ENV if os.environ.get(STORE_ENV, "").strip() else
                        STORE_FILE if url is not None else "the default: the local data dir")
    report["url"] = redact(url) if url is not None else f"jsonl: {project.data_dir}"
    try:
        report["streams"] = count_streams(url if url is not None else f"{JSONL}:", project)
        report["answers"] = True
    except LoopstateError as error:
        report["problem"] = f"the store {report['url']} does not answer: {error.message}"
    return report


def text(report: dict[str, Any]) -> list[str]:
    lines = [f"store: {report['url'] or '?'} ({report['source'] or 'not resolved'})"]
    if report["answers"]:
        lines.append(f"  answers: yes, {report['streams']} streams of this project")
    if report["problem"]:
        lines.append(f"  problem: {report['problem']}")
    return lines
