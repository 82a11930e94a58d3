"""The levels the book chose for "breaks" and "stays flat", moved for a reader to see how a
verdict leans on them, and the board that keeps the stated ones."""

import pytest

from rflens.claims import verdicts
from rflens.measure import criterion


def test_a_level_holds_inside_its_block_only():
    assert (criterion.tol_level(), criterion.breaks_level()) == (criterion.EXTRAPOLATION_TOLERANCE, criterion.BREAKS)
    with criterion.levels(breaks=1.5):
        assert criterion.breaks_level() == 1.5 and criterion.tol_level() == criterion.EXTRAPOLATION_TOLERANCE
        with criterion.levels():  # a block without levels is the stated ones
            assert criterion.breaks_level() == criterion.BREAKS
    assert criterion.breaks_level() == criterion.BREAKS
    for bad in (1.0, 0.5, float("nan"), "2"):
        with pytest.raises(ValueError, match="above 1"), criterion.levels(tol=bad):
            pass


def test_extrapolates_reads_the_level_in_force():
    ppl = {32: 10.0, 64: 10.8, 512: 11.2}  # r = 1.08, 1.12
    assert criterion.extrapolates(ppl, 32) is False
    with criterion.levels(tol=1.15):
        assert criterion.extrapolates(ppl, 32) is True
    assert criterion.extrapolates(ppl, 32, tol=1.2) is True


@pytest.mark.parametrize("level", sorted(verdicts.SENSITIVITY))
def test_at_the_stated_level_the_sensitivity_is_the_board(level):
    """The column of the stated level is the board's verdict; a level a hair (1e-4) away from it
    (claim 6 then rereads every model from its r columns) gives the same verdicts."""
    stated = verdicts.STATED[level]
    table = verdicts.sensitivity("long", level, values=(stated, stated + 1e-4))
    board = {r["id"]: r["result"] for r in verdicts.check_shipped("long")}
    for cid, row in table.iterrows():
        assert list(row.iloc[1:3]) == [board[cid]] * 2, (level, cid)
        assert row["flips at"] == ""


def test_an_unknown_level_is_one_line():
    from rflens.errors import UserError

    with pytest.raises(UserError, match="unknown level"):
        verdicts.sensitivity("long", "flat")
