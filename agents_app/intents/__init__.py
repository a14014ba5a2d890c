"""Intent tree reads, the per-process router cache and the examples' stored embeddings (the tree's writes live in
agents_app.services.intents)."""
