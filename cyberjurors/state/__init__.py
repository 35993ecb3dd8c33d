"""The workers' state: Faust tables in memory or in RocksDB (``tables.py``), what each stage sent on
(``results.py``), and entries that expire by a stored time (``expiry.py``)."""
