"""The parameter checks every notebook runs after its parameters cell: bad values stop with a reason."""

from __future__ import annotations

import pytest

from companion.support import parameters as p
from companion.support.display import table


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


@pytest.mark.parametrize("bad", ["My_Bucket", "a/b", "Bad_Bucket/../x", "ab", "a" * 64, "a..b", "-ab", "ab-", "192.168.5.4",
                                 "xn--ab", "ab-s3alias", None, 3])
def test_bucket_names_by_the_s3_rules(bad):
    assert p.s3_bucket_name("bucket", "workbook-11-sessions") == "workbook-11-sessions"
    assert p.s3_bucket_name("bucket", "my.bucket-2") == "my.bucket-2"
    with pytest.raises(p.ParameterError, match=r"^bucket must be an S3 bucket name") as raised:
        p.s3_bucket_name("bucket", bad)
    assert repr(bad) in str(raised.value)


@pytest.mark.parametrize("bad", ["t!", "a/b", "ab", "x" * 256, "tab le", "", None])
def test_table_names_by_the_dynamodb_rules(bad):
    assert p.dynamodb_table_name("memory_table", "Workbook_11.memory-x") == "Workbook_11.memory-x"
    with pytest.raises(p.ParameterError, match=r"^memory_table must be a DynamoDB table name") as raised:
        p.dynamodb_table_name("memory_table", bad)
    assert p.shown(bad) in str(raised.value), "the value, cut to 200 characters (x * 256 is cut)"


# Issue 31, item 12: a lone surrogate is refused where the value is checked; a message quotes at most ~200 characters.


def test_a_lone_surrogate_is_refused_with_a_clear_message():
    """Before the fix "12 Harbour \\udc80Lane" passed text() and failed later with a raw UnicodeEncodeError."""
    for bad in ("12 Harbour \udc80Lane", "\ud800", "x\udfff"):
        with pytest.raises(p.ParameterError, match=r"value must be a text without lone surrogates.*U\+D[8-F][0-9A-F]{2}"):
            p.text("value", bad)
    assert p.text("value", "12 Harbour Lane \U0001f3e0") == "12 Harbour Lane \U0001f3e0", "a real emoji is fine"


def test_a_message_quotes_at_most_about_200_characters_of_a_value():
    """Before the fix a 1 MB value was quoted in full in the message."""
    for check in (lambda v: p.integer("turns", v, minimum=1), lambda v: p.choice("x", v, ("a", "b")),
                  lambda v: p.text("value", v + "\udc80"), lambda v: p.s3_bucket_name("bucket", v),
                  lambda v: p.different(("a", "b"), (v, v))):
        with pytest.raises(p.ParameterError) as raised:
            check("A" * 1_000_000)
        assert len(str(raised.value)) < 600 and "more characters" in str(raised.value), str(raised.value)[:300]
