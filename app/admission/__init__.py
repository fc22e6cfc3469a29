"""Admission control, fairness between tenants, and batching: how Engram stays fast and honest under load."""

from app.admission.gate import Admission, AdmissionConfig, Ticket

__all__ = ["Admission", "AdmissionConfig", "Ticket"]
