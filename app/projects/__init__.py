"""Project knowledge: a repository's documents indexed into a session as memories, and kept current."""
