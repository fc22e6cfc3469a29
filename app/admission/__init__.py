"""Admission control, fairness between tenants, and batching: how Engram stays fast and honest under load.

Nothing is imported here: the database layer uses ``app.admission.probe`` and must not load the gate (and Redis).
"""
