"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.InsertWatermarksP_IntegrationTest`: a
whole job on LocalEngine, watermarks turned into strings before the list sink."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import DAG, AbstractProcessor, LocalEngine
from jetspark.core.watermark import Watermark
from jetspark.edges import between
from jetspark.processors import insert_watermarks_p, read_list_p, whole_item, write_list_p
from jetspark.processors.watermark_policies import emit_by_frame, limiting_lag
from jetspark.processors.windowing import tumbling_window_policy

pytestmark = pytest.mark.timeout(120)


class MapWatermarksToString(AbstractProcessor):
    """Passes items through and emits each watermark as the string `wm(N)`."""

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        return self.try_emit(item)

    def try_process_watermark(self, watermark: Watermark) -> bool:
        return self.try_emit(f"wm({watermark.timestamp})")


def test_test() -> None:
    """`InsertWatermarksP_IntegrationTest.test`."""
    engine = LocalEngine()
    engine.get_list("source").extend([111, 222, 333])
    dag = DAG()
    source = dag.new_vertex("source", read_list_p("source"))
    iwm = dag.new_vertex(
        "iwm",
        insert_watermarks_p(
            whole_item, limiting_lag(100), emit_by_frame(tumbling_window_policy(100))
        ),
        local_parallelism=1,
    )
    map_wm_to_str = dag.new_vertex("mapWmToStr", MapWatermarksToString, local_parallelism=1)
    sink = dag.new_vertex("sink", write_list_p("list"))
    dag.edge(between(source, iwm)).edge(between(iwm, map_wm_to_str)).edge(
        between(map_wm_to_str, sink)
    )
    engine.new_job(dag).join(timeout=60)
    assert engine.get_list("list") == ["wm(0)", 111, "wm(100)", 222, "wm(200)", 333]
