"""CPU profiles per load step (see docs/profiles.md)."""
