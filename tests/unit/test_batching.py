"""Batch formation, seeded execution order and per-request seeds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capsule.errors import BadInputError
from capsule.generation.batching import batch_keys_sha256, execution_order, form_batches, request_seed


def test_file_order_chunks_exactly_batch_size_with_remainder_last() -> None:
    batches = form_batches([5, 3, 9, 1, 7], {}, 2, "file")
    assert [b.keys for b in batches] == [(5, 3), (9, 1), (7,)]
    assert [b.index for b in batches] == [0, 1, 2]


def test_length_order_sorts_by_token_count_then_position() -> None:
    lengths = {5: 30, 3: 10, 9: 10, 1: 20}
    batches = form_batches([5, 3, 9, 1], lengths, 3, "length")
    assert [b.keys for b in batches] == [(3, 9, 1), (5,)]


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(BadInputError, match="batch_order"):
        form_batches([1], {1: 1}, 1, "random")
    with pytest.raises(BadInputError, match="at least 1"):
        form_batches([1], {1: 1}, 0, "file")
    with pytest.raises(BadInputError, match="duplicate"):
        form_batches([1, 1], {1: 1}, 1, "file")


@given(
    st.lists(st.integers(0, 10_000), unique=True, max_size=60),
    st.integers(1, 9),
    st.sampled_from(["file", "length"]),
)
def test_every_key_lands_in_exactly_one_batch(keys: list[int], size: int, order: str) -> None:
    batches = form_batches(keys, {k: k % 7 for k in keys}, size, order)
    flat = [k for b in batches for k in b.keys]
    assert sorted(flat) == sorted(keys)
    assert all(len(b.keys) == size for b in batches[:-1])


def test_execution_order_is_a_seeded_permutation() -> None:
    first = execution_order(20, seed=1)
    assert sorted(first) == list(range(20))
    assert execution_order(20, seed=1) == first
    assert execution_order(20, seed=2) != first
    assert first != list(range(20))  # not formation order: a capped arm samples batches


def test_request_seed_depends_on_arm_seed_and_key_only() -> None:
    assert request_seed(0, 1000) == request_seed(0, 1000)
    assert request_seed(0, 1000) != request_seed(1, 1000)
    assert request_seed(0, 1000) != request_seed(0, 1001)
    assert 0 <= request_seed(123, 456) < 2**63


def test_batch_keys_hash_names_the_neighbours_in_order() -> None:
    assert batch_keys_sha256([1, 2]) != batch_keys_sha256([2, 1])
    assert form_batches([1, 2], {}, 2, "file")[0].keys_sha256 == batch_keys_sha256([1, 2])
