"""The event core: encoding, hash chain, streams, locks, store layout, recovery.

Written once and shared by every domain; nothing here knows what a claim, a run
or a todo is.
"""
