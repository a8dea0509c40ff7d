"""Writers around the engine's results: seed-style transcripts, JSON, tables."""
