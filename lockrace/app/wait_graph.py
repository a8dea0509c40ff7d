"""The wait-for graph drawn: a box per client, an arrow from each waiter to what it
waits for, a deadlock's cycle in red.

Layout: a client that waits for nobody (it holds what others want) stands in the
rightmost column; each waiter stands one column left of the furthest-left client it
waits for, so every arrow points right ("waits for").  The edge that closes a cycle
runs back underneath the boxes.  ``draw_graph`` is plain text; ``WaitGraph`` shows it.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widget import Widget

from ..engine.lock_graph import LockGraph, LockNode, cycle_text
from .palette import themed
from .status import lock_words, seconds

BOX_H = 4  # top border with the name, two lines, bottom border
ROW_GAP = 1
COL_GAP = 6


class Canvas:
    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.cells = [[(" ", "")] * width for _ in range(height)]

    def put(self, x: int, y: int, ch: str, style: str = "") -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.cells[y][x] = (ch, style)

    def text(self, x: int, y: int, s: str, style: str = "", room: int | None = None) -> None:
        if room is not None and cell_len(s) > room:
            cut = Text(s)
            cut.truncate(max(0, room), overflow="ellipsis")
            s = cut.plain
        for i, ch in enumerate(s):
            self.put(x + i, y, ch, style)

    def hline(self, x0: int, x1: int, y: int, style: str, ch: str = "─") -> None:
        for x in range(min(x0, x1), max(x0, x1) + 1):
            self.put(x, y, ch, style)

    def vline(self, x: int, y0: int, y1: int, style: str, ch: str = "│") -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            self.put(x, y, ch, style)

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="crop")
        rows = list(self.cells)
        while rows and all(ch == " " for ch, _ in rows[-1]):
            rows.pop()
        self.cells = rows
        for y, row in enumerate(self.cells):
            run, run_style = "", None
            for ch, style in row:
                if style != run_style and run:
                    out.append(run, style=run_style or "")
                    run = ""
                run += ch
                run_style = style
            if run:
                out.append(run.rstrip() if not run_style else run, style=run_style or "")
            if y < len(self.cells) - 1:
                out.append("\n")
        return out


def _levels(names: list[str], edges: list[tuple[str, str]], back: set[tuple[str, str]]) -> dict[str, int]:
    """The longest chain of waits from each client to one that waits for nobody (back edges left out)."""
    out: dict[str, int] = {}

    def level(name: str, seen: tuple[str, ...]) -> int:
        if name in out:
            return out[name]
        nxt = [b for a, b in edges if a == name and (a, b) not in back and b not in seen]
        value = 0 if not nxt else 1 + max(level(b, seen + (name,)) for b in nxt)
        out[name] = value
        return value

    for name in names:
        level(name, ())
    return out


def _components(names: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    parent = {n: n for n in names}

    def find(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(find(n), []).append(n)
    return list(groups.values())


def box_lines(node: LockNode, graph: LockGraph) -> tuple[str, str, str]:
    """(title, first line, second line) of a client's box."""
    title = node.label.replace(" · ", " ")
    waits = [w for w in graph.waits if w.waiter == node.name]
    if waits:
        first = f"waits {seconds(node.waiting_ns)}" if node.waiting_ns else "waits"
        lock = waits[0].lock
        second = lock_words(lock) if lock is not None else "for " + ", ".join(w.blocker for w in waits)
    elif node.foreign:
        first = "not in the race" if not node.process else "server process"
        second = "holds what others wait for"
    else:
        first = node.txn or "holds"
        second = node.holds[0] if node.holds else (
            "holds what others wait for" if graph.waiters_on(node.name) else "holds no lock others want")
    return title, first, second


def draw_graph(graph: LockGraph, width: int, highlight: tuple[str, ...] = ()) -> Text:
    """The graph in ``width`` cells; the clients of ``highlight`` (a deadlock's cycle, in
    order) and its edges in red.  Clients that neither wait nor are waited for are left out."""
    edges = [(w.waiter, w.blocker) for w in graph.waits]
    live_edges = set(edges)
    cycle_edges = set()
    cycles = list(graph.cycles())
    live_cycles = list(cycles)
    if highlight and highlight not in cycles:
        cycles.append(highlight)  # broken already: its waits that ended are drawn dashed
    for cycle in cycles:
        for i, name in enumerate(cycle):
            cycle_edges.add((name, cycle[(i + 1) % len(cycle)]))
    for a, b in cycle_edges:  # a highlighted cycle that has been broken already: its edges drawn too
        if (a, b) not in edges:
            edges.append((a, b))
    involved = [n.name for n in graph.nodes if any(n.name in e for e in edges)]
    if not involved:
        return Text("Nobody waits: no lock is contended right now.", style=themed("$lr-muted"))
    # back edges: in each cycle, the one into its first client (drawn underneath)
    back = {(c[-1], c[0]) for c in cycles}
    in_cycle = {n for c in cycles for n in c}
    red, amber, plain = themed("bold $lr-deadlock"), themed("$lr-blocked"), themed("$lr-bar-text")
    out = Text(no_wrap=True, overflow="crop")
    for group in _components(involved, edges):
        group_edges = [e for e in edges if e[0] in group]
        levels = _levels(group, group_edges, back)
        depth = max(levels.values())
        columns = depth + 1
        gap = COL_GAP if width >= 100 else 4
        box_w = max(15, min(42, (width - (columns - 1) * gap) // columns))
        by_col: dict[int, list[str]] = {}
        for name in group:
            by_col.setdefault(depth - levels[name], []).append(name)
        rows = max(len(v) for v in by_col.values())
        column = {name: col for col, names in by_col.items() for name in names}
        # underneath: a cycle's closing edge, and an edge that would cross a column of boxes
        under = [e for e in group_edges if e in back or column[e[1]] - column[e[0]] != 1]
        height = rows * (BOX_H + ROW_GAP) + len(under) + 1
        canvas = Canvas(max(width, columns * (box_w + gap) - gap), height)
        at: dict[str, tuple[int, int]] = {}
        for col, names in by_col.items():
            for row, name in enumerate(names):
                at[name] = (col * (box_w + gap), row * (BOX_H + ROW_GAP))
        # the arrows first: the boxes are drawn over them
        ends: dict[str, int] = {}
        for i, (a, b) in enumerate(under):
            style = red if (a, b) in cycle_edges else amber
            h, v = ("─", "│") if (a, b) in live_edges else ("╌", "╎")
            ax, ay = at[a]
            bx, by = at[b]
            y = rows * (BOX_H + ROW_GAP) - ROW_GAP + i + 1
            x0 = ax + box_w // 2 - 2 - i
            x1 = bx + box_w // 2 + 2 * ends.get(b, 0)
            ends[b] = ends.get(b, 0) + 1
            canvas.vline(x0, ay + BOX_H, y, style, v)
            canvas.vline(x1, by + BOX_H, y, style, v)
            canvas.hline(x0, x1, y, style, h)
            canvas.put(x0, y, "╯" if x0 > x1 else "╰", style)
            canvas.put(x1, y, "╰" if x0 > x1 else "╯", style)
            canvas.put(x1, by + BOX_H, "▲", style)
        for a, b in group_edges:
            if (a, b) in under:
                continue
            style = red if (a, b) in cycle_edges else amber
            h, v = ("─", "│") if (a, b) in live_edges else ("╌", "╎")
            ax, ay = at[a]
            bx, by = at[b]
            y0, y1 = ay + 1, by + 1
            start, end = ax + box_w, bx - 1
            turn = bx - gap // 2
            canvas.hline(start, turn, y0, style, h)
            if y1 != y0:
                canvas.vline(turn, y0, y1, style, v)
                canvas.put(turn, y0, "╮" if y1 > y0 else "╯", style)
                canvas.put(turn, y1, "╰" if y1 > y0 else "╭", style)
            canvas.hline(turn + (1 if y1 != y0 else 0), end, y1, style, h)
            canvas.put(end, y1, "▶", style)
        for name, (x, y) in at.items():
            node = graph.node(name)
            if node is None:
                continue
            title, first, second = box_lines(node, graph)
            waits = any(e[0] == name for e in live_edges)
            style = red if name in in_cycle else (amber if waits else plain)
            heavy = name in in_cycle
            tl, tr, bl, br, h, v = ("┏", "┓", "┗", "┛", "━", "┃") if heavy else ("╭", "╮", "╰", "╯", "─", "│")
            canvas.text(x, y, tl + h * (box_w - 2) + tr, style)
            canvas.text(x + 2, y, f" {title} ", themed("bold") if not heavy else red, room=box_w - 3)
            for k, line in enumerate((first, second)):
                canvas.put(x, y + 1 + k, v, style)
                canvas.text(x + 1, y + 1 + k, " " * (box_w - 2))
                canvas.text(x + 2, y + 1 + k, line, amber if (waits and k == 0) else "", room=box_w - 3)
                canvas.put(x + box_w - 1, y + 1 + k, v, style)
            canvas.text(x, y + BOX_H - 1, bl + h * (box_w - 2) + br, style)
        if out.plain:
            out.append("\n\n")
        out.append_text(canvas.render())
    for cycle in cycles:
        out.append("\n")
        if cycle in live_cycles:
            out.append(f" deadlock cycle: {cycle_text(cycle)} ", style=themed("bold white on $lr-deadlock-badge"))
        else:
            out.append(f" deadlock cycle: {cycle_text(cycle)} ", style=themed("bold white on $lr-deadlock-badge"))
            out.append("  broken by the server: ╌ a wait it ended", style=themed("$lr-deadlock"))
    return out


class WaitGraph(Widget):
    """The drawn graph of the lock view; ``show(graph, highlight)`` redraws it."""

    DEFAULT_CSS = "WaitGraph { height: auto; text-wrap: nowrap; text-overflow: clip; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.graph: LockGraph | None = None
        self.highlight: tuple[str, ...] = ()
        self._drawn: tuple = ()

    def show(self, graph: LockGraph, highlight: tuple[str, ...] = ()) -> None:
        self.graph, self.highlight = graph, highlight
        self.refresh(layout=True)

    def _text(self, width: int) -> Text:
        if self.graph is None:
            return Text("")
        return draw_graph(self.graph, width, self.highlight)

    def get_content_height(self, container, viewport, width: int) -> int:
        return self._text(width).plain.count("\n") + 1

    def render(self) -> Text:
        return self._text(self.size.width or 80)
