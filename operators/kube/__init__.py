"""The API client: every component talks to the API server through it (see
docs/architecture.md, Layers)."""
