"""One place that checks a notebook's parameters, so a bad value stops at the top with a reason, not as a bare assert.

Notebooks call these right after the parameters cell (papermill injects overrides there); every message names the
parameter, the value received (at most `SHOWN_CHARS` of it) and what is accepted.
"""

from __future__ import annotations

from typing import Any

SHOWN_CHARS = 200
"""How much of a value a message quotes: a 1 MB value would otherwise fill the screen (and the notebook)."""


class ParameterError(ValueError):
    """A notebook parameter outside the values the lesson's claim holds for."""


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """repr() of a value, cut to `limit` characters with a count of the rest."""
    try:
        text = repr(value)
    except RecursionError:
        return f"<a {type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _fail(name: str, value: Any, expected: str) -> ParameterError:
    return ParameterError(f"{name} must be {expected}; got {shown(value)}. Change it in the parameters cell "
                          "(or papermill -p).")


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate in `text` (None: there is none). A string holding one cannot be written
    as UTF-8: a file, a notebook or a request fails later with a raw UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None, even: bool = False,
            why: str = "") -> int:
    """A whole number in [minimum, maximum], optionally even; `why` is added to the message."""
    parts = ["an even" if even else "a whole", "number"]
    if minimum is not None and maximum is not None:
        parts.append(f"from {minimum} to {maximum}")
    elif minimum is not None:
        parts.append(f"of {minimum} or more")
    elif maximum is not None:
        parts.append(f"of at most {maximum}")
    expected = " ".join(parts) + (f" ({why})" if why else "")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, value, expected)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum) or (even and value % 2):
        raise _fail(name, value, expected)
    return value


def fraction(name: str, value: Any, *, low: float = 0.0, high: float = 1.0, include_low: bool = False,
             include_high: bool = True, why: str = "") -> float:
    """A number in an interval such as (0, 1]; ints are accepted and returned as floats."""
    lo, hi = ("[" if include_low else "("), ("]" if include_high else ")")
    expected = f"a number in {lo}{low:g}, {high:g}{hi}" + (f" ({why})" if why else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise _fail(name, value, expected)
    above = value >= low if include_low else value > low
    below = value <= high if include_high else value < high
    if not (above and below):
        raise _fail(name, value, expected)
    return float(value)


def text(name: str, value: Any, *, why: str = "") -> str:
    """A non-empty string (spaces alone do not count)."""
    expected = "a non-empty text" + (f" ({why})" if why else "")
    if not isinstance(value, str) or not value.strip():
        raise _fail(name, value, expected)
    at = lone_surrogate(value)
    if at is not None:
        raise _fail(name, value, f"a text without lone surrogates (character {at + 1} is U+{ord(value[at]):04X}, half "
                                 "of a pair that UTF-8 cannot write: type the character itself)")
    return value


def choice(name: str, value: Any, choices: list[Any] | tuple[Any, ...]) -> Any:
    """One of a fixed list of values."""
    if value not in choices:
        raise _fail(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def different(names: tuple[str, str], values: tuple[Any, Any], why: str = "") -> None:
    """Two parameters that must not be equal (for example two session ids that a lesson compares)."""
    if values[0] == values[1]:
        raise ParameterError(
            f"{names[0]} and {names[1]} must differ; both are {shown(values[0])}" + (f" ({why})" if why else "")
            + ". Change one in the parameters cell (or papermill -p)."
        )


# --- names that AWS itself checks: refused here, before anything is written, by the service's own rules ------------

_BUCKET_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789.-")
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_TABLE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def s3_bucket_name(name: str, value: Any) -> str:
    """An S3 general purpose bucket name as AWS accepts it: 3-63 characters of lowercase letters, digits, '.' and
    '-', starting and ending with a letter or digit, no '..', not an IP address, none of the reserved prefixes and
    suffixes (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""
    expected = ("an S3 bucket name: 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter "
                "or digit (no '_', '/', capitals or '..')")
    if not isinstance(value, str) or not 3 <= len(value) <= 63 or not set(value) <= _BUCKET_CHARS:
        raise _fail(name, value, expected)
    if not (value[0].isalnum() and value[-1].isalnum()) or ".." in value:
        raise _fail(name, value, expected)
    parts = value.split(".")
    if len(parts) == 4 and all(part.isdigit() for part in parts):
        raise _fail(name, value, expected + ", not formatted as an IP address")
    if value.startswith(_BUCKET_PREFIXES) or value.endswith(_BUCKET_SUFFIXES):
        raise _fail(name, value, expected + "; AWS reserves the prefixes " + ", ".join(_BUCKET_PREFIXES)
                    + " and the suffixes " + ", ".join(_BUCKET_SUFFIXES))
    return value


def dynamodb_table_name(name: str, value: Any) -> str:
    """A DynamoDB table name as AWS accepts it: 3-255 characters of letters, digits, '_', '-' and '.'
    (docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html)."""
    if not isinstance(value, str) or not 3 <= len(value) <= 255 or not set(value) <= _TABLE_CHARS:
        raise _fail(name, value, "a DynamoDB table name: 3 to 255 letters, digits, '_', '-' or '.'")
    return value
