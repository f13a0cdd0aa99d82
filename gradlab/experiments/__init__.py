"""Studies: each module trains or measures and returns a JSON-ready dict with per-seed values."""
