"""Which store a project uses (core/stores.py): the URL from the environment or the
project's store file, the local JSONL store without either, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopstate_protocol.errors import ErrorCode

from loopstate.core import stores
from loopstate.core.errors import LoopstateError
from loopstate.core.jsonl_store import JsonlStore
from loopstate.core.project import Project


def write_store_file(root: Path, text: str) -> Path:
    path = root / stores.STORE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_without_a_url_the_project_uses_the_local_jsonl_store(root: Path, data_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stores.STORE_ENV, raising=False)
    assert stores.configured_url(str(root)) is None
    project = Project(str(root), data_dir=data_dir)
    store = stores.open_store(project)
    assert isinstance(store, JsonlStore) and store.project is project
    assert stores.open_store(project) is store  # one per project object


def test_the_environment_wins_over_the_store_file(root: Path) -> None:
    write_store_file(root, '{"url": "postgresql://team@db/loop"}')
    assert stores.configured_url(str(root), {}) == "postgresql://team@db/loop"
    assert stores.configured_url(str(root), {stores.STORE_ENV: "jsonl:"}) == "jsonl:"
    assert stores.configured_url(str(root), {stores.STORE_ENV: "  "}) == "postgresql://team@db/loop"


@pytest.mark.parametrize("text", ["{not json", '{"url": 3}', '["postgresql://x"]', '{"url": ""}'])
def test_a_store_file_that_is_not_a_url_is_refused_with_what_to_fix(root: Path, text: str) -> None:
    path = write_store_file(root, text)
    with pytest.raises(LoopstateError) as caught:
        stores.configured_url(str(root), {})
    assert caught.value.code is ErrorCode.INVALID_PARAMS
    assert str(path) in caught.value.message and '{"url":' in caught.value.message


def test_an_unknown_scheme_is_refused_naming_the_known_ones(root: Path, data_dir: Path) -> None:
    with pytest.raises(LoopstateError) as caught:
        stores.open_store(Project(str(root), data_dir=data_dir), "mysql://user:secret@db/x")
    assert caught.value.code is ErrorCode.INVALID_PARAMS
    assert "postgresql:" in caught.value.message and "jsonl:" in caught.value.message
    assert "secret" not in caught.value.message


def test_a_store_whose_module_is_missing_is_a_clear_error_naming_the_url(
    root: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(stores.SCHEMES, "nowhere", "loopstate.core.no_such_store:open_store")
    with pytest.raises(LoopstateError) as caught:
        stores.open_store(Project(str(root), data_dir=data_dir), "nowhere://user:secret@host/db")
    assert caught.value.code is ErrorCode.STORE_IO_ERROR
    assert "nowhere://user:***@host/db" in caught.value.message and "secret" not in caught.value.message


def test_a_registered_scheme_is_opened_with_the_url_and_the_project(root: Path, data_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(stores.SCHEMES, "local", "loopstate.core.jsonl_store:open_store")
    project = Project(str(root), data_dir=data_dir)
    store = stores.open_store(project, "local:team")
    assert isinstance(store, JsonlStore) and store.url == "local:team"
    with pytest.raises(ValueError):
        stores.register_scheme("bad", "no_function_named")


def test_urls_are_shown_without_their_password() -> None:
    assert stores.redacted("postgresql://ana:s3cret@db.example:5433/loop?sslmode=require") == (
        "postgresql://ana:***@db.example:5433/loop?sslmode=require")
    assert stores.redacted("postgresql:///loop?host=/tmp") == "postgresql:///loop?host=/tmp"


def test_a_password_given_as_a_libpq_parameter_is_hidden_too() -> None:
    """libpq takes ``password=`` and ``sslpassword=`` in the query; neither reaches a message, and a
    host-less URL keeps its ``//`` when something in it is hidden."""
    assert stores.redacted("postgresql:///loop?host=/run/pg&password=hunter2") == (
        "postgresql:///loop?host=/run/pg&password=***")
    assert stores.redacted("postgresql://ana:one@h/db?sslpassword=two&sslmode=require") == (
        "postgresql://ana:***@h/db?sslpassword=***&sslmode=require")
    assert stores.redacted("postgresql://h/db?PASSWORD=x") == "postgresql://h/db?PASSWORD=***"
    assert "hunter2" not in stores.redacted("postgres://u:hunter2@[::1]:5432/db?password=hunter2")
