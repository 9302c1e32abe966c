"""The three domains (intent, runs, goals), one folder each; each is pure (no files, clock or ids)."""
