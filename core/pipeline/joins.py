"""JoinClause: how a hash join matches an enriching item to a primary one (manual §4.7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jetspark.processors.functions import entry_key, entry_value, whole_item


@dataclass(frozen=True)
class JoinClause:
    """`left_key_fn(primary item)` is looked up among the enriching items by
    `right_key_fn(enriching item)`; `right_project_fn(enriching item)` is what is joined."""

    left_key_fn: Callable[[Any], Any]
    right_key_fn: Callable[[Any], Any] = whole_item
    right_project_fn: Callable[[Any], Any] = whole_item

    @staticmethod
    def join_map_entries(left_key_fn: Callable[[Any], Any]) -> JoinClause:
        """Joins `(key, value)` enriching entries on their key, joining their value."""
        return JoinClause(left_key_fn, entry_key, entry_value)

    @staticmethod
    def on_keys(
        left_key_fn: Callable[[Any], Any], right_key_fn: Callable[[Any], Any]
    ) -> JoinClause:
        """Joins whole enriching items whose `right_key_fn` equals the primary's `left_key_fn`."""
        return JoinClause(left_key_fn, right_key_fn, whole_item)

    def project(self, right_project_fn: Callable[[Any], Any]) -> JoinClause:
        """This clause joining `right_project_fn(enriching item)` instead."""
        return replace(self, right_project_fn=right_project_fn)
