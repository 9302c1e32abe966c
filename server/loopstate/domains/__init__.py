"""The three domains, one folder per seed; each is pure (no files, clock or ids)."""
