"""Long ::add-mask:: values travel as overlapping pieces that cover the whole value."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.runner.uploader import MAX_MASK_CHARACTERS, mask_pieces


@given(st.text(min_size=1, max_size=3 * MAX_MASK_CHARACTERS + 7))
def test_pieces_cover_the_value_and_fit_the_wire(value: str) -> None:
    pieces = mask_pieces(value)
    assert all(len(piece) <= MAX_MASK_CHARACTERS for piece in pieces)
    covered = [False] * len(value)
    position = 0
    for piece in pieces:
        start = value.index(piece, max(0, position - MAX_MASK_CHARACTERS))
        for index in range(start, start + len(piece)):
            covered[index] = True
        position = start + len(piece)
    assert all(covered)
    if len(value) > MAX_MASK_CHARACTERS:
        # Every piece is long: a short tail piece would mask common text everywhere.
        assert all(len(piece) == MAX_MASK_CHARACTERS for piece in pieces)
    else:
        assert pieces == [value]
