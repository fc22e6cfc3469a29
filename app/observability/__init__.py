"""Metrics (``/metrics``), structured logs with request ids, and the redaction that keeps secrets out of both."""
