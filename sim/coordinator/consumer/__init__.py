"""The consumer group protocol's coordinator (KIP-848)."""
