"""Tooling: what runs beside the workers, never inside them. clients.py (cases produced, events and
verdicts read and followed, dead letters replayed: the command line's, the console's and the
evaluation's client), broker.py (the embedded broker), worker_process.py (a worker as a child
process), demo.py (`cyberjurors demo`: a broker, a worker and the sample cases)."""
