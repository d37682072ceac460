"""Key normalisation: keys equal in a Python dict must encode to equal msgpack bytes."""

from __future__ import annotations

import numbers
import reprlib

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_FIX = (
    "use a key function that returns str/bytes/int/float/bool/None or tuples of them, "
    "or give the edge a custom partitioner"
)


class UnpartitionableKeyError(TypeError):
    """A key no process can map to one agreed partition; a TypeError that routing code can catch."""


def normalise_key(key: object) -> object:
    """Return the msgpack-ready form of ``key`` so that keys equal in a dict encode alike.

    bool and other integrals become int, an integral float becomes int (1, 1.0 and True agree,
    -0.0 becomes 0), a list or tuple becomes a tuple of normalised items; str, bytes, int, float
    and None stay as they are. Anything else raises :class:`UnpartitionableKeyError`.
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
    if isinstance(value, numbers.Real):
        return _normalise_float(float(value))
    if isinstance(value, (set, frozenset)):
        reason = "set iteration order differs between Python processes"
    elif isinstance(value, dict):
        reason = "two equal dicts with a different insertion order would encode differently"
    else:
        reason = "msgpack cannot encode it deterministically"
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


def _refusal(value: object, key: object, reason: str) -> UnpartitionableKeyError:
    """Build the error that names the offending type, why it is refused, and the fix."""
    kind = type(value).__qualname__
    if value is key:
        what = f"a key of type {kind!r}"
    else:
        what = f"the key {reprlib.repr(key)}, which holds a value of type {kind!r}"
    return UnpartitionableKeyError(f"cannot partition {what}: {reason}; {_FIX}")
