"""The proof queries over a real `loopstate serve`: the key, the kept checkpoint and both proofs, each
checked offline by the real `loopstate check-proof`; a rewritten history refused with CORRUPT_LEDGER."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from rpckit import client, run_cli, servers, Servers  # noqa: F401 (fixtures)

from loopstate_protocol import proofs
from loopstate_protocol.client import LoopstateClient, RpcError

pytestmark = pytest.mark.both_stores  # docs/storage.md, *Which tests run on PostgreSQL*


def claims(data_dir: Path, root: Path, count: int) -> None:
    listed = msgspec.json.decode(run_cli(data_dir, "intent", "tasks", "--json", "--root", str(root)).stdout)
    if listed["current_task_id"] is None:
        assert run_cli(data_dir, "intent", "start", "--claim", "outcome:Prove it", "--root", str(root)).returncode == 0
        listed = msgspec.json.decode(run_cli(data_dir, "intent", "tasks", "--json", "--root", str(root)).stdout)
    task = listed["current_task_id"]
    for n in range(count):
        done = run_cli(data_dir, "intent", "add", task, f"Claim {n}", "--root", str(root))
        assert done.returncode == 0, done.stderr


def check_offline(data_dir: Path, tmp_path: Path, proof: str, key: str, old: str | None = None) -> str:
    (tmp_path / "proof").write_text(proof)
    args = ["check-proof", str(tmp_path / "proof"), "--key", key]
    if old is not None:
        (tmp_path / "old").write_text(old)
        args += ["--old", str(tmp_path / "old")]
    done = run_cli(tmp_path / "no-store", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_proof_queries_answer_what_an_outside_checker_accepts(client: LoopstateClient, root: Path, data_dir: Path,
                                                                tmp_path: Path) -> None:
    r = str(root)
    claims(data_dir, root, 3)
    key = msgspec.convert(client.query(r, {"kind": "project.public_key"}), proofs.PublicKey).key
    assert key == run_cli(data_dir, "checkpoint", "--public-key", "--root", r).stdout.strip()

    none_yet = msgspec.convert(client.query(r, {"kind": "project.checkpoint", "stream": "intent"}), proofs.CheckpointNote)
    assert none_yet.note is None and none_yet.tree_size is None
    assert run_cli(data_dir, "checkpoint", "intent", "--root", r).returncode == 0
    kept = msgspec.convert(client.query(r, {"kind": "project.checkpoint", "stream": "intent"}), proofs.CheckpointNote)
    assert kept.tree_size == 4 and kept.note.startswith("loopstate/")

    claims(data_dir, root, 2)
    inclusion = msgspec.convert(client.query(r, {"kind": "project.prove_inclusion", "stream": "intent", "sequence": 2}),
                                proofs.ProofText)
    assert inclusion.kind == "inclusion" and inclusion.tree_size == 6
    assert "event 2 of 6" in check_offline(data_dir, tmp_path, inclusion.proof, key)
    consistency = msgspec.convert(client.query(r, {"kind": "project.prove_consistency", "checkpoint": kept.note}),
                                  proofs.ProofText)
    assert consistency.kind == "consistency" and consistency.tree_size == 6
    assert "still begins with the 4 events" in check_offline(data_dir, tmp_path, consistency.proof, key, kept.note)


def test_bad_proof_queries_get_clear_errors_and_the_server_goes_on(client: LoopstateClient, root: Path,
                                                                   data_dir: Path) -> None:
    r = str(root)
    claims(data_dir, root, 1)
    for query, code, words in (
        ({"kind": "project.prove_inclusion", "stream": "intent", "sequence": 99}, "NOT_FOUND", "no event number 99"),
        ({"kind": "project.prove_inclusion", "stream": "intent", "sequence": 0}, "INVALID_PARAMS", ">= 1"),
        ({"kind": "project.prove_inclusion", "stream": "runs.nope", "sequence": 1}, "NOT_FOUND", "no stream"),
        ({"kind": "project.prove_consistency", "checkpoint": "not a note"}, "VALIDATION_FAILED", "not a checkpoint"),
    ):
        with pytest.raises(RpcError) as caught:
            client.query(r, query)
        assert caught.value.code == code and words in caught.value.message, caught.value.message
    assert msgspec.convert(client.query(r, {"kind": "project.public_key"}), proofs.PublicKey).key
