"""Spark settings for the length of a test, and free ports to fix a continuous job's listeners
at (no tests here)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def configured(context: Any, settings: dict[str, str]) -> Iterator[None]:
    """`context`'s configuration with `settings` (keys with dots) for the block, then as
    before."""
    conf = context._jsc.sc().conf()
    before = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.remove(key)
            else:
                conf.set(key, value)


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports of 127.0.0.1 that are free now."""
    while True:
        with socket.create_server(("127.0.0.1", 0)) as first:
            base = int(first.getsockname()[1])
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    stack.enter_context(socket.create_server(("127.0.0.1", port)))
            return base
        except OSError:
            continue
