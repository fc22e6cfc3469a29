"""Your data is yours: an account's export (a versioned JSONL format), its import into any Engram, and its deletion."""
