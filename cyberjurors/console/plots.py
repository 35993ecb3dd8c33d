"""The case page's two drawings, rendered server-side to SVG with matplotlib (and networkx for the
graph): the vote shift across rounds, and the social graph (who follows whom) coloured by each
round's votes. Served as images (``<img>``), so nothing in them can run in the page."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display; figures are built with the object API, never pyplot's global state

import networkx as nx
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..jury.graph import SocialGraph
from ..schemas import JuryRound

COLOURS = {"buyer": "#2b6cb0", "seller": "#dd6b20"}
SWITCHED = "#111111"
matplotlib.rcParams["svg.hashsalt"] = "cyberjurors-console"  # the same drawing gives the same SVG ids


def _svg(figure: Figure) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    return out.getvalue()


def switches(rounds: list[JuryRound]) -> list[set[int]]:
    """Per round, the jurors whose vote differs from their vote in the round before."""
    out: list[set[int]] = []
    before: dict[int, str] = {}
    for r in rounds:
        now: dict[int, str] = {b.juror: b.vote for b in r.ballots}
        out.append({j for j, v in now.items() if j in before and before[j] != v})
        before = now or before
    return out


def vote_shift(rounds: list[JuryRound]) -> bytes:
    """Buyer and seller votes per round (bars, from each round's summary, so a round whose ballots
    were trimmed still counts), the jurors who switched written above."""
    figure = Figure(figsize=(max(3.2, 1.3 * len(rounds) + 1.5), 2.6))
    ax = figure.add_subplot()
    xs = [r.round for r in rounds]
    buyer = [r.summary.votes.buyer for r in rounds]
    seller = [r.summary.votes.seller for r in rounds]
    width = 0.38
    ax.bar([x - width / 2 for x in xs], buyer, width, color=COLOURS["buyer"], label="buyer")
    ax.bar([x + width / 2 for x in xs], seller, width, color=COLOURS["seller"], label="seller")
    for x, b, s, moved in zip(xs, buyer, seller, switches(rounds), strict=True):
        ax.annotate(str(b), (x - width / 2, b), ha="center", va="bottom", fontsize=8)
        ax.annotate(str(s), (x + width / 2, s), ha="center", va="bottom", fontsize=8)
        if moved:
            ax.annotate(f"{len(moved)} switched", (x, max(b, s) * 1.12 + 0.5), ha="center", fontsize=8)
    ax.set_xticks(xs, [f"round {x}" for x in xs])
    ax.set_ylabel("votes")
    ax.set_ylim(0, max(buyer + seller + [1]) * 1.35 + 1)
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncols=2)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def social_graph(rounds: list[JuryRound], graph: SocialGraph, names: list[str]) -> bytes:
    """One panel per round: juror k -> juror j when k follows (reads) j, each juror coloured by that
    round's vote, outlined black when it switched from the round before; grey when the round's
    ballots were not kept."""
    panels = len(rounds)
    figure = Figure(figsize=(3.4 * panels, 3.7))
    g = nx.DiGraph()
    g.add_nodes_from(range(len(names)))
    g.add_edges_from((k, j) for k, follows in graph.following.items() for j in follows if j < len(names))
    layout = nx.circular_layout(g)  # the small world's ring: its shortcuts show as chords
    moved = switches(rounds)
    for i, r in enumerate(rounds):
        ax = figure.add_subplot(1, panels, i + 1)
        votes = {b.juror: b.vote for b in r.ballots}
        colours = [COLOURS.get(votes.get(n, ""), "#bbbbbb") for n in g.nodes]
        edges = [SWITCHED if n in moved[i] else "white" for n in g.nodes]
        nx.draw_networkx_edges(g, layout, ax=ax, edge_color="#999999", width=0.6, arrowsize=6, alpha=0.7, node_size=260)
        nx.draw_networkx_nodes(g, layout, ax=ax, node_color=colours, edgecolors=edges, linewidths=1.8, node_size=260)
        nx.draw_networkx_labels(g, layout, ax=ax, labels={n: str(n) for n in g.nodes}, font_size=7, font_color="white")
        ax.set_title(f"round {r.round}: buyer {r.summary.votes.buyer} / seller {r.summary.votes.seller}", fontsize=9)
        ax.set_axis_off()
    handles = [Line2D([], [], marker="o", ls="", color=c, label=p) for p, c in COLOURS.items()]
    handles.append(Line2D([], [], marker="o", ls="", color="white", markeredgecolor=SWITCHED, label="switched"))
    figure.legend(handles=handles, loc="lower center", ncols=3, fontsize=8, frameon=False)
    return _svg(figure)
