"""The Merkle tree over a stream's lines, hashed as RFC 9162 (Certificate Transparency 2.0) says.

The hash chain lets loopstate see damage to its own store; a Merkle tree lets it
show someone else, with a few hashes instead of the whole log, that one event is
in a stream (an inclusion proof) and that an older head is a prefix of today's
(a consistency proof). The hashing is the RFC's, so any verifier of transparency
logs can check loopstate's proofs:

- a leaf is ``SHA-256(0x00 || line)``, where ``line`` is the event's stored line,
  byte for byte, without its terminating newline;
- an inner node is ``SHA-256(0x01 || left || right)``;
- the tree of ``n`` leaves splits at the largest power of two below ``n``; the
  empty tree's root is ``SHA-256("")``.

``CompactRange`` keeps only the roots of the perfect subtrees that make up the
tree so far (at most log2(n) + 1 of them), so adding a leaf costs O(log n) hashes
and the root is known at every size without re-reading anything. Proofs are built
from the list of leaf hashes (which the stream file yields again at any time).
Every function here is pure: bytes in, bytes out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
_LEAF = b"\x00"
_NODE = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(line: bytes) -> bytes:
    """The hash of one leaf: the line's exact bytes under the leaf prefix."""
    return hashlib.sha256(_LEAF + line).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2): where the RFC splits a tree of n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """The root of the tree over these leaf hashes."""
    return _subtree(leaves, 0, len(leaves)) if leaves else EMPTY_ROOT


def _subtree(leaves: Sequence[bytes], start: int, end: int) -> bytes:
    """The root of the leaves ``[start, end)`` (non-empty), one pass over them.

    A perfect subtree (a power of two of leaves) is hashed level by level, one
    list at a time, which is several times faster in Python than recursing to
    every node; only the ragged right edge recurses.
    """
    n = end - start
    if n & (n - 1) == 0:
        level = [leaves[i] for i in range(start, end)]
        while len(level) > 1:
            level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        return level[0]
    k = _split(n)
    return node_hash(_subtree(leaves, start, start + k), _subtree(leaves, start + k, end))


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of the first ``size`` leaves, lowest level first."""
    size = len(leaves) if size is None else size
    if not 0 <= index < size <= len(leaves):
        raise ValueError(f"no leaf {index} in a tree of {size} leaves")
    path: list[bytes] = []
    start, end = 0, size
    # Walk from the root down to the leaf, collecting the sibling of each subtree taken.
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(_subtree(leaves, start + k, end))
            end = start + k
        else:
            path.append(_subtree(leaves, start, start + k))
            start += k
    path.reverse()
    return path


def consistency_proof(leaves: Sequence[bytes], old_size: int, new_size: int | None = None) -> list[bytes]:
    """The hashes that prove the tree of ``old_size`` leaves is a prefix of the tree of ``new_size``."""
    new_size = len(leaves) if new_size is None else new_size
    if not 0 <= old_size <= new_size <= len(leaves):
        raise ValueError(f"no consistency proof from {old_size} to {new_size} leaves")
    if old_size in (0, new_size):
        return []
    proof: list[bytes] = []
    _subproof(leaves, old_size, 0, new_size, True, proof)
    return proof


def _subproof(leaves: Sequence[bytes], m: int, start: int, end: int, whole: bool, out: list[bytes]) -> None:
    """RFC 9162's SUBPROOF(m, D[start:end], whole), appended to ``out`` in the RFC's order."""
    n = end - start
    if m == n:
        if not whole:
            out.append(_subtree(leaves, start, end))
        return
    k = _split(n)
    if m <= k:
        _subproof(leaves, m, start, start + k, whole, out)
        out.append(_subtree(leaves, start + k, end))
    else:
        _subproof(leaves, m - k, start + k, end, False, out)
        out.append(_subtree(leaves, start, start + k))


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes], expected_root: bytes) -> bool:
    """Whether ``path`` proves ``leaf`` at ``index`` in the tree of ``size`` leaves with ``expected_root``."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == expected_root


def verify_consistency(old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes) -> bool:
    """Whether ``proof`` shows the tree (old_size, old_root) is a prefix of (new_size, new_root)."""
    if not 0 <= old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is itself a node of the new tree
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


class CompactRange:
    """The tree so far as the roots of its perfect subtrees, largest first: O(log n) to extend.

    ``size`` leaves decompose by the binary digits of ``size``: one perfect
    subtree per set bit. Adding a leaf merges equal-sized subtrees, as binary
    addition carries. ``root()`` folds them from the right, which is exactly the
    RFC's split at the largest power of two.
    """

    __slots__ = ("size", "peaks")

    def __init__(self, size: int = 0, peaks: Sequence[bytes] = ()) -> None:
        if len(peaks) != bin(size).count("1"):
            raise ValueError(f"a tree of {size} leaves has {bin(size).count('1')} perfect subtrees, not {len(peaks)}")
        self.size = size
        self.peaks = list(peaks)

    def append(self, leaf: bytes) -> None:
        self.peaks.append(leaf)
        self.size += 1
        carry = self.size
        while not carry & 1:  # each trailing zero bit of the new size is a merge of two equal subtrees
            right = self.peaks.pop()
            self.peaks[-1] = node_hash(self.peaks[-1], right)
            carry >>= 1

    def root(self) -> bytes:
        if not self.peaks:
            return EMPTY_ROOT
        acc = self.peaks[-1]
        for peak in reversed(self.peaks[:-1]):
            acc = node_hash(peak, acc)
        return acc
