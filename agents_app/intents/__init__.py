"""Intent tree reads, the per-process router cache, and import/export (writes live in agents_app.services.intents)."""
