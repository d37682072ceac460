"""jetspark's own picture of a DAG, for machines without Graphviz: vertices in layers from the
top by their longest path from a source, each layer ordered by where its upstream vertices
stand, edges as arrows (bold: distributed) whose routing shows on hovering. SVG, with the
structure of Graphviz's: a `g.node` per vertex and a `g.edge` per edge, titled by what they
picture."""

from __future__ import annotations

from xml.sax.saxutils import escape

from jetspark.core.dag import DAG
from jetspark.edges.edge import Edge

CHAR_WIDTH = 7.5
"""Pixels per character of a 12 px sans-serif label (an estimate: no font is measured)."""
NODE_HEIGHT = 40
PADDING = 14
NODE_GAP = 40
LAYER_GAP = 80
MARGIN = 20


def layers(dag: DAG) -> list[list[str]]:
    """The vertex names by layer: a source in layer 0, any other vertex one layer below its
    lowest upstream vertex; in a layer, ordered by the mean position of its upstream vertices
    in theirs (sources in the order they were added)."""
    depth: dict[str, int] = {}
    upstream: dict[str, list[str]] = {}
    result: list[list[str]] = []
    for vertex in dag.vertices():
        name = vertex.name
        upstream[name] = [e.source_name for e in dag.inbound_edges(name)]
        depth[name] = max((depth[source] + 1 for source in upstream[name]), default=0)
        if depth[name] == len(result):
            result.append([])
        result[depth[name]].append(name)
    position = {name: float(i) for i, name in enumerate(result[0])} if result else {}
    for layer in result[1:]:
        layer.sort(key=lambda name: sum(position[s] for s in upstream[name]) / len(upstream[name]))
        position.update((name, float(i)) for i, name in enumerate(layer))
    return result


def layered_svg(dag: DAG) -> str:
    """An `<svg>` element picturing `dag` in `layers(dag)`."""
    boxes: dict[str, tuple[float, float, float]] = {}
    """Vertex name -> (left x, top y, width)."""
    rows = layers(dag)
    widths = [[_node_width(name) for name in layer] for layer in rows]
    total = max(sum(w) + NODE_GAP * (len(w) - 1) for w in widths)
    for depth, (layer, layer_widths) in enumerate(zip(rows, widths, strict=True)):
        x = MARGIN + (total - sum(layer_widths) - NODE_GAP * (len(layer) - 1)) / 2
        y: float = MARGIN + depth * (NODE_HEIGHT + LAYER_GAP)
        for name, node_width in zip(layer, layer_widths, strict=True):
            boxes[name] = (x, y, node_width)
            x += node_width + NODE_GAP
    edges = []
    for edge in dag.edges():
        source, dest = edge.source_name, edge.dest_name or ""
        x1 = _spread(boxes[source], edge, dag.outbound_edges(source))
        x2 = _spread(boxes[dest], edge, dag.inbound_edges(dest))
        y1, y2 = boxes[source][1] + NODE_HEIGHT, boxes[dest][1]
        title = f"{source} -> {dest}: {edge.describe()}"
        edges.append(
            f'<g class="edge"><title>{escape(title)}</title>'
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="black" '
            f'stroke-width="{2 if edge.is_distributed else 1}" marker-end="url(#arrow)"/></g>'
        )
    width = total + 2 * MARGIN
    height = len(rows) * (NODE_HEIGHT + LAYER_GAP) - LAYER_GAP + 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" '
        f'height="{height:.0f}pt" viewBox="0 0 {width:.0f} {height:.0f}" '
        'font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" '
        'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
        *edges,
    ]
    for name, (x, y, w) in boxes.items():
        parts.append(
            f'<g class="node"><title>{escape(name)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{NODE_HEIGHT}" rx="6" '
            'fill="white" stroke="black"/>'
            f'<text x="{x + w / 2:.1f}" y="{y + NODE_HEIGHT / 2 + 4:.1f}" '
            f'text-anchor="middle">{escape(name)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _spread(box: tuple[float, float, float], edge: Edge, edges: list[Edge]) -> float:
    """Where on `box`'s bottom or top `edge`, one of `edges`, meets it: spread evenly."""
    left, _, width = box
    return left + width * (edges.index(edge) + 1) / (len(edges) + 1)


def _node_width(name: str) -> float:
    return len(name) * CHAR_WIDTH + 2 * PADDING
