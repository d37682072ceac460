"""Key normalisation: keys equal in a Python dict must encode to equal msgpack bytes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import math
import numbers
import reprlib
import uuid

import msgpack

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_FIX = (
    "use a key function that returns str, bytes, int, float, bool, None, Decimal, Fraction, "
    "date, datetime, time, timedelta, UUID, an Enum member, a frozen dataclass, or a tuple, "
    "list or frozenset of them; or give the edge your own partitioner: "
    "edge.partitioned(key_fn, partitioner)"
)
_OUT_OF_RANGE_RATIO = (
    "its exact numerator or denominator is outside the 64-bit range msgpack encodes"
)
_US_PER_DAY = 86_400_000_000
_MICROSECOND = dt.timedelta(microseconds=1)
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
"""Rounds nothing: ``normalize`` under it only strips trailing zeros."""
_pack = msgpack.Packer(unicode_errors="surrogatepass").pack
"""Orders a frozenset's elements; packs only normalised values, so never calls back into Python."""


class UnpartitionableKeyError(TypeError):
    """A key no process can map to one agreed partition; a TypeError that routing code can catch."""


def normalise_key(key: object) -> object:
    """Return the msgpack-ready form of ``key`` so that keys equal in a dict encode alike.

    Numbers encode as the int or float they equal (1, 1.0, True, Decimal(1), Fraction(2, 2) and
    an IntEnum of 1 agree; -0.0 becomes 0), else a Decimal or Fraction as its exact ratio; a str
    subclass (StrEnum) stays as it is; lists, tuples and NamedTuples become tuples. date,
    datetime, time, timedelta, UUID, plain Enum members, frozen dataclasses and frozensets
    become tuples tagged with a string starting with NUL: aware datetimes and times by their UTC
    equivalent, Enum members and dataclasses by their class's module and qualified name.
    Anything else, or an int or exact ratio beyond 64 bits, raises
    :class:`UnpartitionableKeyError`. Nothing depends on ``hash()``, so every process agrees.
    """
    return _normalise(key, key)


def _normalise(value: object, key: object) -> object:
    """Normalise one value found inside ``key`` (``key`` is only used in the error message)."""
    if type(value) is str or type(value) is bytes or value is None:
        return value
    if isinstance(value, int):
        return _checked_int(value, key)
    if isinstance(value, float):
        return _normalise_float(float(value))
    if isinstance(value, (tuple, list)):
        return tuple([_normalise(item, key) for item in value])
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, numbers.Integral):
        return _checked_int(value, key)
    if isinstance(value, (decimal.Decimal, numbers.Rational)):
        return _normalise_exact(value, key)
    if isinstance(value, numbers.Real):
        return _normalise_float(float(value))
    if isinstance(value, dt.datetime):
        return _normalise_clock("\x00datetime", value, value.toordinal())
    if isinstance(value, dt.date):
        return ("\x00date", value.toordinal())
    if isinstance(value, dt.time):
        return _normalise_clock("\x00time", value, 0)
    if isinstance(value, dt.timedelta):
        return ("\x00timedelta", value.days, value.seconds, value.microseconds)
    if isinstance(value, uuid.UUID):
        return ("\x00uuid", value.bytes)
    if isinstance(value, frozenset):
        return ("\x00frozenset", *sorted([_pack(_normalise(item, key)) for item in value]))
    if isinstance(value, enum.Enum):  # a plain Enum or Flag: int, str, ... mixins are above
        member = value.value if isinstance(value, enum.Flag) else value.name
        return ("\x00enum", *_class_name(value), _normalise(member, key))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _normalise_dataclass(value, key)
    if isinstance(value, set):
        reason = "set iteration order differs between Python processes (a frozenset is accepted)"
    elif isinstance(value, dict):
        reason = "two equal dicts with a different insertion order would encode differently"
    else:
        reason = "jetspark knows no encoding of it that keeps equal keys equal in every process"
    raise _refusal(value, key, reason)


def _checked_int(value: int | numbers.Integral, key: object) -> int:
    """Return ``value`` as a plain int if msgpack can encode it (64 bits), else refuse it."""
    number = int(value)
    if _INT_MIN <= number <= _INT_MAX:
        return number
    raise _refusal(value, key, f"{number} is outside the 64-bit range msgpack encodes")


def _normalise_float(number: float) -> int | float:
    """Turn an integral float into the int it equals, when msgpack can encode that int."""
    if number.is_integer() and _INT_MIN <= number <= _INT_MAX:
        return int(number)
    return number


def _normalise_exact(value: decimal.Decimal | numbers.Rational, key: object) -> object:
    """Encode a Decimal or Fraction as the float it equals (NaN too), else by its exact ratio.

    The ratio is in lowest terms: an integral value is the int it equals, any other one
    ``("\\x00ratio", numerator, denominator)``, so equal Decimals and Fractions agree.
    """
    if isinstance(value, decimal.Decimal) and value.is_snan():
        raise _refusal(value, key, "a signalling NaN cannot be hashed")
    try:
        number = float(value)
    except OverflowError:  # a Fraction beyond the float range: equal to no float
        number = math.inf
    if number == value or math.isnan(number):
        return _normalise_float(number)
    if isinstance(value, decimal.Decimal):
        numerator, denominator = _decimal_ratio(value, key)
    else:
        numerator, denominator = int(value.numerator), int(value.denominator)
    if not (_INT_MIN <= numerator <= _INT_MAX and denominator <= _INT_MAX):
        raise _refusal(value, key, _OUT_OF_RANGE_RATIO)
    return numerator if denominator == 1 else ("\x00ratio", numerator, denominator)


def _decimal_ratio(value: decimal.Decimal, key: object) -> tuple[int, int]:
    """Return the lowest-terms ratio of a finite Decimal, refusing one beyond 64 bits cheaply.

    Without trailing zeros, a Decimal of 10**20 or more has a numerator beyond 64 bits, and one
    with an exponent of -64 or less a denominator of 2**64 or more: ``Decimal('1e-999999')``
    is refused without computing 10**999999.
    """
    reduced = value.normalize(_EXACT)
    exponent = reduced.as_tuple().exponent
    assert isinstance(exponent, int)  # finite: NaN and infinities equal a float
    if reduced.adjusted() >= 20 or exponent <= -64:
        raise _refusal(value, key, _OUT_OF_RANGE_RATIO)
    return reduced.as_integer_ratio()


def _normalise_clock(tag: str, value: dt.datetime | dt.time, day: int) -> tuple[str, bool, int]:
    """Encode a datetime or time as ``(tag, aware, microseconds)``: naive ones by their fields,
    aware ones at UTC, as equality compares them.

    The offset is that of ``fold=0``, as in ``hash()``: values with one tzinfo compare by their
    fields, ignoring fold, and ones with different tzinfos are never equal in a fold (PEP 495).
    """
    offset = (value.replace(fold=0) if value.fold else value).utcoffset()
    clock = (value.hour * 3600 + value.minute * 60 + value.second) * 1_000_000
    micros = day * _US_PER_DAY + clock + value.microsecond
    if offset is None:
        return (tag, False, micros)
    return (tag, True, micros - offset // _MICROSECOND)


def _normalise_dataclass(value: object, key: object) -> tuple[object, ...]:
    """Encode a frozen dataclass with ``eq=True`` by its class and its compared fields."""
    params = type(value).__dataclass_params__  # type: ignore[attr-defined]
    if not (params.frozen and params.eq):
        reason = "only a dataclass declared @dataclass(frozen=True) (with eq=True) is accepted"
        raise _refusal(value, key, reason)
    fields = [
        _normalise(getattr(value, field.name), key)
        for field in dataclasses.fields(value)  # type: ignore[arg-type]
        if field.compare
    ]
    return ("\x00dataclass", *_class_name(value), *fields)


def _class_name(value: object) -> tuple[str, str]:
    """Name ``value``'s class the same way in every process: its module and qualified name."""
    kind = type(value)
    return (kind.__module__, kind.__qualname__)


def _refusal(value: object, key: object, reason: str) -> UnpartitionableKeyError:
    """Build the error that names the offending type, why it is refused, and the fix."""
    kind = type(value).__qualname__
    if value is key:
        what = f"a key of type {kind!r}"
    else:
        what = f"the key {reprlib.repr(key)}, which holds a value of type {kind!r}"
    return UnpartitionableKeyError(f"cannot partition {what}: {reason}; {_FIX}")
