"""Settings package: base plus one module per environment (dev, test, production)."""
