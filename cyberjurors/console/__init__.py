"""`cyberjurors console`: a small server-rendered web application for the people around the jury
(operations staff, human jurors taking escalated cases, auditors).

It follows disputes.verdicts, disputes.escalations, disputes.rounds, disputes.outcomes, disputes.dlq
and disputes.dlq-replayed into a local SQLite store (``store.py``, ``feed.py``) and shows the case
list, a case (evidence by round, frames, clue chain, ballots, vote shift and social graph,
precedents, notes, cost), the review queue, whose decisions go to disputes.outcomes
(``review.py``), and the dead letters, each replayable once from the page (``app.py``). It belongs
on the streaming side: it reads topics and calls tooling/clients.py, and reads media only through
media.py.
"""
