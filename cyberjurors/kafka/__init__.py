"""Kafka: what the worker and its clients share of the cluster, below the stages. cluster.py (the
topics and their configs, client options and credentials, creating the topics), producers.py
(idempotence where the broker grants it, the clients' producer), transport.py (the Faust consumer's
commits and long-poll), lag.py (the consumer group's lag, read from the broker)."""
