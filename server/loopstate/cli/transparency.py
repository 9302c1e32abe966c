"""`loopstate checkpoint`, `prove` and `check-proof`: signed tree heads and the proofs against them.

``checkpoint`` signs each stream's Merkle root and prints the notes (keep them:
they are what loopstate can later be held to). ``prove EVENT`` proves one event
is in its stream; ``prove --from FILE`` proves the stream still begins with what
an older checkpoint signed. ``check-proof`` checks either with only the proof,
the checkpoint and the public key, no store (what an outside party runs), and
``verify --against FILE`` (cli/store.py) checks the store itself against a kept
checkpoint. docs/verifying.md walks through it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loopstate_protocol.errors import ErrorCode

from loopstate.cli.output import add_common, emit_json, project_root
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project


def register(sub: argparse._SubParsersAction) -> None:
    checkpoint = sub.add_parser(
        "checkpoint", help="sign each stream's Merkle tree head and print the checkpoints (C2SP signed notes)",
        description="Verify each stream (or STREAM), sign its Merkle root with this machine's key (made on first use "
        "in the data dir, mode 0600) and print the signed checkpoints. Keep one: `loopstate verify --against FILE` "
        "and `loopstate prove --from FILE` hold the store to it later.",
    )
    add_common(checkpoint)
    checkpoint.add_argument("stream", nargs="?", help="only this stream (e.g. intent, runs.<id>); default: every stream")
    checkpoint.add_argument("--publish", metavar="DIR",
                            help="also write each checkpoint to DIR/<stream>.checkpoint (to commit or hand to a witness)")
    checkpoint.add_argument("--public-key", action="store_true",
                            help="print the verifier key a checker needs (NAME+KEYID+KEY) instead")
    checkpoint.set_defaults(func=cmd_checkpoint)

    prove = sub.add_parser(
        "prove", help="prove an event is in its stream, or that a stream extends an older checkpoint",
        description="With EVENT (an event_id, or STREAM:SEQUENCE as `loopstate log` shows it): print an inclusion "
        "proof (c2sp.org/tlog-proof@v1) of that event against a fresh signed checkpoint. With --from FILE: print a "
        "consistency proof from the checkpoint in FILE to the stream's current one. Check either with "
        "`loopstate check-proof`.",
    )
    add_common(prove)
    prove.add_argument("event", nargs="?", help="the event: its event_id, or STREAM:SEQUENCE")
    prove.add_argument("--from", dest="old", metavar="FILE", help="an older checkpoint of one stream")
    prove.set_defaults(func=cmd_prove)

    check = sub.add_parser(
        "check-proof", help="check a proof with only the proof, the public key and (for consistency) the old checkpoint",
        description="Check a proof printed by `loopstate prove` without any store: an inclusion proof with --key, a "
        "consistency proof with --key and --old. Exit 0 and a one-line verdict when it holds, 1 with the reason when "
        "it does not.",
    )
    check.add_argument("proof", metavar="FILE", help="the proof ('-' for stdin)")
    check.add_argument("--key", required=True,
                       help="the verifier key (NAME+KEYID+KEY, as `loopstate checkpoint --public-key` prints), or a file holding it")
    check.add_argument("--old", metavar="FILE", help="the older checkpoint a consistency proof starts from")
    check.add_argument("--json", action="store_true", help="print machine-readable JSON")
    check.set_defaults(func=cmd_check_proof)


def _project(args: argparse.Namespace) -> Project:
    return Project(project_root(args))


def _read(path: str, what: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"cannot read the {what} {path}: {exc}") from None


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from loopstate.service import transparency

    project = _project(args)
    if args.public_key:
        key = transparency.public_key(project)
        emit_json({"public_key": key}) if args.json else print(key)
        return 0
    names = [args.stream] if args.stream else transparency.stream_names(project)
    notes = {name: transparency.make_checkpoint(project, name) for name in names}
    if args.publish:
        folder = Path(args.publish)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, note in notes.items():
                (folder / f"{name}.checkpoint").write_text(note, encoding="utf-8")
        except OSError as exc:
            raise LoopstateError(ErrorCode.INVALID_PARAMS, f"cannot publish to {folder}: {exc}") from None
    if args.json:
        emit_json({"project_id": project.project_id, "checkpoints": [{"stream": n, "note": t} for n, t in notes.items()]})
    else:
        if not notes:
            print(f"no streams yet for {project.root}")
        sys.stdout.write("\n".join(notes.values()))
    return 0


def cmd_prove(args: argparse.Namespace) -> int:
    from loopstate.service import transparency

    if (args.event is None) == (args.old is None):
        raise LoopstateError(ErrorCode.INVALID_PARAMS,
                             "name an EVENT (an inclusion proof) or --from CHECKPOINT_FILE (a consistency proof), one of the two")
    project = _project(args)
    if args.old is not None:
        proof = transparency.prove_consistency(project, _read(args.old, "checkpoint"))
    else:
        stream, index = transparency.locate(project, args.event)
        proof = transparency.prove_inclusion(project, stream, index)
    emit_json({"proof": proof}) if args.json else sys.stdout.write(proof)
    return 0


def cmd_check_proof(args: argparse.Namespace) -> int:
    from loopstate.core.proof_check import check_consistency, check_inclusion
    from loopstate.core.signed_note import NoteError, Verifier

    key_text = args.key if "+" in args.key else _read(args.key, "verifier key")
    proof = _read(args.proof, "proof")
    try:
        verifier = Verifier.parse(key_text)
        if args.old is None:
            found = check_inclusion(proof, verifier)
            verdict = {"ok": True, "kind": "inclusion", "origin": found.checkpoint.origin,
                       "index": found.index, "tree_size": found.checkpoint.size}
            message = f"ok: event {found.index + 1} of {found.checkpoint.size} is in {found.checkpoint.origin} as signed"
        else:
            old, new = check_consistency(_read(args.old, "checkpoint"), proof, verifier)
            verdict = {"ok": True, "kind": "consistency", "origin": new.origin, "old_size": old.size, "tree_size": new.size}
            message = (f"ok: {new.origin} at {_events(new.size)} still begins with the {_events(old.size)} "
                       "signed before")
    except NoteError as exc:
        raise LoopstateError(ErrorCode.VALIDATION_FAILED, f"the proof does not hold: {exc}") from None
    emit_json(verdict) if args.json else print(message)
    return 0


def verify_against(args: argparse.Namespace) -> int:
    """``loopstate verify --against FILE``: the store still begins with what the kept checkpoint signed."""
    from loopstate.service import transparency

    project = _project(args)
    old, stream = transparency.read_checkpoint(project, _read(args.against, "checkpoint"))
    report = transparency.check_against(project, old, stream)
    if args.json:
        emit_json(report)
    else:
        print(f"ok      {stream}: {_events(report['events'])}, still beginning with the {_events(old.size)} "
              "the checkpoint signed")
    return 0


def _events(count: int) -> str:
    return f"{count} event" if count == 1 else f"{count} events"
