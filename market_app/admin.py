"""Admin registrations (added with the feature)."""
