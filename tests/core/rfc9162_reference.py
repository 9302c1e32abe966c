"""An independent RFC 9162 verifier for the tests, written from the RFC's recursive definitions.

It shares no code with loopstate.core.merkle, and takes the other road: the
implementation verifies proofs with the RFC's iterative bit-walking algorithms;
this rebuilds the roots by following the recursive definitions of MTH, PATH and
SUBPROOF top-down. Two unrelated derivations agreeing is the point.
"""

from __future__ import annotations

import hashlib


def leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def k_of(n: int) -> int:
    """The largest power of two strictly below n (n > 1), found by doubling."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = k_of(len(hashes))
    return node(mth(hashes[:k]), mth(hashes[k:]))


def root_from_path(leaf_hash: bytes, m: int, n: int, path: list[bytes]) -> bytes | None:
    """The root PATH(m, D[n]) leads to from this leaf; None if the path has the wrong length."""
    if n == 1:
        return leaf_hash if not path else None
    if not path:
        return None
    k = k_of(n)
    *rest, sibling = path  # the last hash of the path is the top level's sibling
    if m < k:
        below = root_from_path(leaf_hash, m, k, rest)
        return None if below is None else node(below, sibling)
    below = root_from_path(leaf_hash, m - k, n - k, rest)
    return None if below is None else node(sibling, below)


def verify_inclusion(leaf_hash: bytes, m: int, n: int, path: list[bytes], root: bytes) -> bool:
    return 0 <= m < n and root_from_path(leaf_hash, m, n, list(path)) == root


def _roots_from_subproof(m: int, n: int, proof: list[bytes], whole: bool, old_root: bytes) -> tuple[bytes, bytes]:
    """(old root, new root) that SUBPROOF(m, D[n], whole) attests, consuming ``proof`` from its end."""
    if m == n:
        if whole:
            return old_root, old_root
        h = proof.pop()
        return h, h
    k = k_of(n)
    top = proof.pop()
    if m <= k:
        old, new = _roots_from_subproof(m, k, proof, whole, old_root)
        return old, node(new, top)
    old, new = _roots_from_subproof(m - k, n - k, proof, False, old_root)
    return node(top, old), node(top, new)


def verify_consistency(m: int, n: int, proof: list[bytes], old_root: bytes, new_root: bytes) -> bool:
    if m == n:
        return not proof and old_root == new_root
    if m == 0:
        return not proof
    if not 0 < m < n:
        return False
    rest = list(proof)
    try:
        old, new = _roots_from_subproof(m, n, rest, True, old_root)
    except IndexError:
        return False
    return not rest and old == old_root and new == new_root
