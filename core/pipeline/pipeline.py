"""Pipeline: the entry point of the Pipeline API (manual chapter 4). Draw from sources, apply
stages, drain to sinks; `to_dag()` plans the Core DAG that an engine runs."""

from __future__ import annotations

from typing import overload

from jetspark.core.dag import DAG
from jetspark.core.errors import DagValidationError
from jetspark.core.pipeline.connectors import BatchSource, Sink, Source, StreamSource
from jetspark.core.pipeline.planner import Planner
from jetspark.core.pipeline.stages import BatchStage, ComputeStage, SinkStage, StreamStage
from jetspark.core.pipeline.transforms import SinkTransform, SourceTransform, Transform


class Pipeline:
    """A set of connected stages, from sources to sinks. Submit it like a DAG:
    `engine.new_job(pipeline, config)`; `to_dag()` shows the DAG it plans to."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._transforms: dict[Transform, None] = {}
        """The pipeline's transforms, in the order the stages made them (a dict: membership
        is asked of it for every new stage's inputs)."""
        self._sinks: dict[int, str] = {}

    @staticmethod
    def create(name: str | None = None) -> Pipeline:
        """A new, empty pipeline."""
        return Pipeline(name)

    @overload
    def draw_from(self, source: BatchSource) -> BatchStage: ...

    @overload
    def draw_from(self, source: StreamSource) -> StreamStage: ...

    @overload
    def draw_from(self, source: Source) -> BatchStage | StreamStage: ...

    def draw_from(self, source: Source) -> BatchStage | StreamStage:
        """A stage emitting the items of `source`: a BatchStage for a bounded source, a
        StreamStage for an unbounded one."""
        if not isinstance(source, Source):
            raise TypeError(
                "draw_from takes a Source (Sources.list(name), SourceBuilder...build(), ...), "
                f"got {type(source).__name__}"
            )
        transform = SourceTransform(source)
        self.register(transform)
        if source.bounded:
            return BatchStage(self, transform)
        return StreamStage(self, transform)

    @overload
    def read_from(self, source: BatchSource) -> BatchStage: ...

    @overload
    def read_from(self, source: StreamSource) -> StreamStage: ...

    @overload
    def read_from(self, source: Source) -> BatchStage | StreamStage: ...

    def read_from(self, source: Source) -> BatchStage | StreamStage:
        """Jet 4's name of `draw_from`: the same stage."""
        return self.draw_from(source)

    def register(self, transform: Transform) -> None:
        """Adds a transform a stage created (stages call it); DagValidationError if one of its
        inputs is a stage of another pipeline."""
        self._refuse_foreign(transform.upstream, f"stage '{transform.name}'")
        self._transforms[transform] = None

    def _refuse_foreign(self, inputs: list[Transform], taker: str) -> None:
        """DagValidationError naming the first of `inputs` that is not of this pipeline and the
        stage it was given to (the first input of this pipeline, else `taker`)."""
        foreign = next((t for t in inputs if t not in self._transforms), None)
        if foreign is None:
            return
        own = next((f"stage '{t.name}'" for t in inputs if t in self._transforms), taker)
        raise DagValidationError(
            f"{own} and stage '{foreign.name}' belong to different pipelines: an operation "
            "takes stages of one pipeline only (draw every source of the job from the same "
            "Pipeline)"
        )

    def claim_sink(self, sink: Sink, stage: str) -> None:
        """Records that `stage` drains to `sink`; a sink object takes one stage only."""
        earlier = self._sinks.get(id(sink))
        if earlier is not None:
            raise DagValidationError(
                f"stage '{stage}': sink '{sink.name}' already drains stage '{earlier}'; merge "
                "the stages first (stage.merge(other)) or create a second sink"
            )
        self._sinks[id(sink)] = stage

    def drain_to(self, sink: Sink, *stages: ComputeStage) -> SinkStage:
        """Drains every stage in `stages` into `sink`: one sink vertex with an edge from each
        (Jet's `Pipeline.drainTo`). The stages must belong to this pipeline and be all batch
        or all stream stages."""
        if not stages:
            raise DagValidationError("Pipeline.drain_to(sink, *stages) needs at least one stage")
        for stage in stages:
            if not isinstance(stage, ComputeStage):
                raise DagValidationError(
                    f"Pipeline.drain_to takes stages (pipeline.draw_from(source)...), got "
                    f"{stage!r:.80}"
                )
        self._refuse_foreign([stage.transform for stage in stages], f"sink '{sink.name}'")
        if len({stage.bounded for stage in stages}) > 1:
            kinds = ", ".join(f"'{s.name}' ({type(s).__name__})" for s in stages)
            raise DagValidationError(
                f"Pipeline.drain_to: sink '{sink.name}' cannot take batch and stream stages "
                f"together: {kinds}; drain them into two sinks"
            )
        self.claim_sink(sink, ", ".join(stage.name for stage in stages))
        transform = SinkTransform([stage._payloads() for stage in stages], sink)
        self.register(transform)
        return SinkStage(self, transform)

    def write_to(self, sink: Sink, *stages: ComputeStage) -> SinkStage:
        """Jet 4's name of `drain_to`: the same sink stage."""
        return self.drain_to(sink, *stages)

    def to_dot(self) -> str:
        """The planned DAG in Graphviz's dot language (`DAG.to_dot`)."""
        return self.to_dag().to_dot()

    def to_dag(self) -> DAG:
        """The Core DAG this pipeline plans to: a vertex (or a `-step1`/`-step2` pair) per
        stage, named after it; chains of map/filter/flat_map fused into one vertex."""
        if not self._transforms:
            raise DagValidationError("the pipeline is empty: draw_from(source) to start it")
        dag = Planner(list(self._transforms), self.name).plan()
        dag.validate()
        return dag

    def explain(self) -> str:
        """The planned DAG as text: each vertex with its local parallelism, then each edge
        with its ends, routing and priority."""
        dag = self.to_dag()
        title = f"pipeline {self.name}" if self.name else "pipeline"
        lines = [f"{title} planned to {len(dag.vertices())} vertices:"]
        for vertex in dag.vertices():
            parallelism = vertex.get_local_parallelism()
            shown = "default" if parallelism == -1 else str(parallelism)
            lines.append(f"  {vertex.name} (local parallelism {shown})")
        lines.append("edges:")
        lines.extend(
            f"  {edge.source_name}:{edge.source_ordinal} -> {edge.dest_name}:{edge.dest_ordinal}"
            f" ({edge.describe()})"
            for edge in dag.edges()
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, {len(self._transforms)} transforms)"
