"""Edge sync: the change log, the sync protocol (edge side) and the links and worker (node side)."""
