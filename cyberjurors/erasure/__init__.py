"""Erasure: `cyberjurors erase`, a case's data erased from every store the service owns.

run.py is the workflow (the steps in their order, each recorded as it ends, a refusal while the
case is in the pipeline, the resume); journal.py its record (the journal, the log without case ids,
the salt of the references). Each store's part is a step: the workers' tables and citations
(asked of the workers, streams/erasure.py), the media keys, the dead letters, the precedent base,
the call log, the media store and the topics are in run.py; the console's (console/erasure.py) and
the evaluation outputs' (evaluation/erasure.py) sit beside their stores, in the rooms above this
one, and the command gives them to the run."""
