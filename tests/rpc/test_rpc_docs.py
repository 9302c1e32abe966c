"""docs/protocol.md is generated: reference from loopstate_protocol, session from a real server."""

from __future__ import annotations

import pytest

from loopstate_protocol.errors import ErrorCode

from loopstate.rpc import docgen


@pytest.mark.jsonl_only("compares generated docs; nothing of it is stored")
def test_docs_protocol_md_is_not_stale() -> None:
    assert docgen.DOC.read_text() == docgen.render(), "run `python -m loopstate.rpc.docgen --write` and commit docs/protocol.md"


def test_every_error_code_has_a_documented_meaning() -> None:
    assert set(docgen.MEANINGS) == set(ErrorCode)
