"""The transformWithStateInPandas baseline of the streaming rows: a count per key kept in
Spark's state store (RocksDB), one output row per key and batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StructField, StructType


class CountPerKey(StatefulProcessor):
    """Counts the rows of each key across batches."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", StructType([StructField("c", LongType())]))

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        total = self.count.get()[0] if self.count.exists() else 0
        for frame in rows:
            total += len(frame)
        self.count.update((total,))
        yield pd.DataFrame({"ticker": [key[0]], "count": [total]})

    def close(self) -> None:
        """Nothing to release."""
