"""The gatekeeper in front of the group, run by a real nginx, and the rows about that door."""
