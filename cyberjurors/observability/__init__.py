"""What an operator sees of a running worker: Prometheus metrics, one OpenTelemetry trace per case,
and the logs."""
