"""Writers around the engine's results: transcripts, JSON, tables."""
