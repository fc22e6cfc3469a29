"""Mem0 Platform compatibility: Mem0's client, pointed at Engram with host=, runs unchanged."""
