"""The changes rehearsed in front of a running group: a key rotation, then a drain."""
