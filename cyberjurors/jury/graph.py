"""The jury's directed social graph G: e_kj means juror k follows (reads) juror j.

Generator: a directed Watts-Strogatz small world. Each juror first follows its ``out_degree``
nearest successors on a ring (local clusters of opinion), then each of those edges is rewired
with probability ``rewire_p`` to a uniformly chosen juror it does not follow yet (the shortcuts
that let one view reach the whole jury in a few rounds). Seeded, so a jury is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class SocialGraph:
    following: dict[int, tuple[int, ...]]

    def neighbours(self, juror: int) -> tuple[int, ...]:
        return self.following.get(juror, ())


def small_world(n: int, out_degree: int = 4, rewire_p: float = 0.2, seed: int = 7) -> SocialGraph:
    rng = random.Random(seed)
    k = min(out_degree, n - 1)
    following: dict[int, tuple[int, ...]] = {}
    for juror in range(n):
        follows = [(juror + step) % n for step in range(1, k + 1)]
        for i in range(len(follows)):
            if rng.random() < rewire_p:
                candidates = [j for j in range(n) if j != juror and j not in follows]
                if candidates:
                    follows[i] = rng.choice(candidates)
        following[juror] = tuple(sorted(follows))
    return SocialGraph(following)


def complete(n: int) -> SocialGraph:
    """Everyone follows everyone: ChatEval's simultaneous-talk debate."""
    return SocialGraph({k: tuple(j for j in range(n) if j != k) for k in range(n)})
