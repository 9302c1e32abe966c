"""The Merkle tree of core/merkle.py against RFC 6962/9162's reference vectors and an independent verifier."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopstate.core import merkle
from tests.core import rfc9162_reference as ref

# The Certificate Transparency reference tree: eight leaves and the root at every size.
DATA = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                   "606162636465666768696a6b6c6d6e6f")]
LEAVES = [merkle.leaf_hash(d) for d in DATA]
ROOTS = {
    0: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
# (0-based leaf index, tree size, audit path)
INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
# (old size, new size, consistency proof)
CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]


def test_roots_match_the_reference_tree_at_every_size_built_whole_and_incrementally() -> None:
    compact = merkle.CompactRange()
    assert compact.root().hex() == ROOTS[0] == merkle.root([]).hex()
    for size in range(1, 9):
        compact.append(LEAVES[size - 1])
        assert merkle.root(LEAVES[:size]).hex() == ROOTS[size]
        assert compact.root().hex() == ROOTS[size]
        assert ref.mth(LEAVES[:size]).hex() == ROOTS[size]


def test_inclusion_proofs_are_the_reference_paths_and_verify_both_ways() -> None:
    for index, size, path in INCLUSION:
        proof = merkle.inclusion_proof(LEAVES, index, size)
        assert [h.hex() for h in proof] == path
        root = bytes.fromhex(ROOTS[size])
        assert merkle.verify_inclusion(LEAVES[index], index, size, proof, root)
        assert ref.verify_inclusion(LEAVES[index], index, size, proof, root)
        assert not merkle.verify_inclusion(LEAVES[index], index, size, proof, bytes.fromhex(ROOTS[size - 1]))


def test_consistency_proofs_are_the_reference_proofs_and_verify_both_ways() -> None:
    for old, new, expected in CONSISTENCY:
        proof = merkle.consistency_proof(LEAVES, old, new)
        assert [h.hex() for h in proof] == expected
        old_root, new_root = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new])
        assert merkle.verify_consistency(old, new, proof, old_root, new_root)
        assert ref.verify_consistency(old, new, proof, old_root, new_root)


def test_a_compact_range_refuses_peaks_that_do_not_fit_its_size() -> None:
    try:
        merkle.CompactRange(3, [LEAVES[0]])
    except ValueError as exc:
        assert "2 perfect subtrees" in str(exc)
    else:
        raise AssertionError("a tree of 3 leaves has two peaks")


def test_proofs_outside_the_tree_are_refused_and_never_verify() -> None:
    for bad in ((8, 8), (-1, 8), (0, 9)):
        try:
            merkle.inclusion_proof(LEAVES, *bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"no proof for leaf {bad[0]} of {bad[1]}")
    assert not merkle.verify_inclusion(LEAVES[0], 8, 8, [], bytes.fromhex(ROOTS[8]))
    assert not merkle.verify_consistency(5, 3, [], bytes(32), bytes(32))
    assert not merkle.verify_consistency(3, 5, [], bytes.fromhex(ROOTS[3]), bytes.fromhex(ROOTS[5]))


leaf_lists = st.lists(st.binary(max_size=12), min_size=1, max_size=70).map(lambda ds: [merkle.leaf_hash(d) for d in ds])


@settings(max_examples=60, deadline=None)
@given(leaf_lists)
def test_every_leaf_and_every_pair_of_sizes_proves_against_both_verifiers(leaves: list[bytes]) -> None:
    n = len(leaves)
    roots = [merkle.root(leaves[:m]) for m in range(n + 1)]
    compact = merkle.CompactRange()
    for m, leaf in enumerate(leaves, start=1):
        compact.append(leaf)
        assert compact.root() == roots[m] == ref.mth(leaves[:m])
    for size in range(1, n + 1):
        for index in range(size):
            path = merkle.inclusion_proof(leaves, index, size)
            assert merkle.verify_inclusion(leaves[index], index, size, path, roots[size])
            assert ref.verify_inclusion(leaves[index], index, size, path, roots[size])
    for old in range(n + 1):
        for new in range(old, n + 1):
            proof = merkle.consistency_proof(leaves, old, new)
            assert merkle.verify_consistency(old, new, proof, roots[old], roots[new])
            assert ref.verify_consistency(old, new, proof, roots[old], roots[new])


@settings(max_examples=60, deadline=None)
@given(leaf_lists, st.integers(min_value=0, max_value=69), st.binary(min_size=1, max_size=8))
def test_a_proof_for_a_different_tree_fails(leaves: list[bytes], at: int, change: bytes) -> None:
    """Change one leaf: the other tree's proofs do not verify against this tree's roots."""
    n = len(leaves)
    at %= n
    other = list(leaves)
    other[at] = merkle.leaf_hash(leaves[at] + change)
    for size in range(at + 1, n + 1):
        root = merkle.root(leaves[:size])
        for index in range(size):
            path = merkle.inclusion_proof(other, index, size)
            assert not merkle.verify_inclusion(other[index], index, size, path, root)
            assert not ref.verify_inclusion(other[index], index, size, path, root)
        for old in range(at + 1, size):
            proof = merkle.consistency_proof(other, old, size)
            # The other tree's old head holds the changed leaf: nothing ties it to this tree's new head
            # (its proof may equal this tree's own, when it hashes only leaves both trees share).
            assert not merkle.verify_consistency(old, size, proof, merkle.root(other[:old]), root)
            assert not ref.verify_consistency(old, size, proof, merkle.root(other[:old]), root)
