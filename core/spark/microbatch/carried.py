"""The watermarks a micro-batch's coalescers carry on from the previous batch of the run.

Within a run, each processor's coalescer starts batch k+1 where it ended batch k: per input
queue, the last watermark its upstream processor sent. That promise holds for the upstream
processor as it was; but batch k+1 restores keyed state by key, so an upstream processor may
take on entries another processor of its vertex saved (sliding-window frames, say), which that
processor had not passed a watermark over yet. Those entries leave behind a watermark their new
holder already sent, and a downstream that trusted the carried one would drop them as late.

So the watermark carried on a queue is capped at the lowest one sent by any processor whose
saved keyed entries its upstream restores (an entry under a broadcast key is a progress marker,
such as a window processor's next window, which holds no items to emit). A processor that
restores only its own keyed entries (no key moved) keeps its watermark, so a quiet input still
does not hold the coalesced watermark back.
"""

from __future__ import annotations

from collections.abc import Mapping

from jetspark.core.runtime.coalescer import NO_WATERMARK, CarriedWatermarks
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.snapshot_store import ProcessorKey


def carried_watermarks(
    plan: JobPlan,
    ended: Mapping[ProcessorKey, CarriedWatermarks],
    keyed: Mapping[ProcessorKey, frozenset[int]],
) -> dict[ProcessorKey, CarriedWatermarks]:
    """What the coalescers of the next batch start from: `ended` (each processor's coalescer at
    the end of the batch) with every queue capped as the module says; `keyed` maps each
    processor that saved state to the global indexes of its vertex that restore its keyed
    entries."""
    senders = {key: queue_senders(plan, key) for key in ended}
    sent: dict[ProcessorKey, float] = {}
    for key, (watermarks, *_) in ended.items():
        for sender, watermark in zip(senders[key], watermarks, strict=True):
            sent[sender] = min(sent.get(sender, watermark), watermark)
    restored_from: dict[ProcessorKey, set[int]] = {}
    for (vertex, index), targets in keyed.items():
        for target in targets:
            restored_from.setdefault((vertex, target), set()).add(index)

    def bound(sender: ProcessorKey) -> float:
        vertex, index = sender
        origins = restored_from.get(sender, set()) | {index}
        return min(sent.get((vertex, origin), NO_WATERMARK) for origin in origins)

    carried: dict[ProcessorKey, CarriedWatermarks] = {}
    for key, (watermarks, idle, last_emitted, idle_emitted) in ended.items():
        capped = tuple(
            min(watermark, bound(sender))
            for sender, watermark in zip(senders[key], watermarks, strict=True)
        )
        carried[key] = (capped, idle, last_emitted, idle_emitted)
    return carried


def queue_senders(plan: JobPlan, key: ProcessorKey) -> list[ProcessorKey]:
    """The upstream processor of each input queue of processor `key`, in its coalescer's order
    (inbound ordinal, then upstream global index, as the runtime wires them)."""
    vertex, index = key
    return [
        (edge.source_name, upstream)
        for edge in plan.vertices[vertex].inbound
        for upstream in edge.senders()[index]
    ]
