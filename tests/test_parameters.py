"""The parameter checks every notebook runs after its parameters cell: bad values stop with a reason."""

from __future__ import annotations

import pytest

from companion import parameters as p
from companion.display import table


def test_integer_bounds_and_parity():
    assert p.integer("turns", 7, minimum=2) == 7
    with pytest.raises(p.ParameterError, match=r"window_size must be an even number of 2 or more \(whole turns\); got 5"):
        p.integer("window_size", 5, minimum=2, even=True, why="whole turns")
    with pytest.raises(p.ParameterError, match="from 1 to 200"):
        p.integer("turns", 201, minimum=1, maximum=200)
    for bad in (True, 2.0, "4", None):
        with pytest.raises(p.ParameterError):
            p.integer("n", bad, minimum=0)


def test_fraction_intervals():
    assert p.fraction("ratio", 1) == 1.0
    for bad in (0, 0.0, 1.5, -1, float("nan"), "0.3", True):
        with pytest.raises(p.ParameterError, match=r"in \(0, 1\]"):
            p.fraction("ratio", bad)
    assert p.fraction("min_score", -1, low=-1, include_low=True) == -1.0


def test_text_choice_and_different():
    assert p.text("user_name", "Ada") == "Ada"
    for bad in ("", "   ", None, 3):
        with pytest.raises(p.ParameterError, match="user_name must be a non-empty text"):
            p.text("user_name", bad)
    with pytest.raises(p.ParameterError, match="one of 'a', 'b'"):
        p.choice("x", "c", ("a", "b"))
    with pytest.raises(p.ParameterError, match="session_id and other_session_id must differ"):
        p.different(("session_id", "other_session_id"), ("s", "s"))


def test_table_is_a_dataframe_numbered_from_one():
    frame = table([{"turn": 1, "ok": True}, {"turn": 2, "ok": False}], ["ok", "turn"])
    assert list(frame.columns) == ["ok", "turn"] and list(frame.index) == [1, 2]
    assert "<table" in frame._repr_html_()
    assert list(table([{"turn": 3, "x": 1}], index="turn").index) == [3]
