"""Installing loopstate into agent hosts (Claude Code, Codex) and checking that it works there.

Pure rules (which file a host reads, what our registration looks like, how it is
merged into and taken out of a config's text, what a receipt says, what a hook's
output must look like) live apart from the effects (reading and writing the files,
keeping receipts, running the host's CLI and the registered hooks):

- ``hosts``: each host's config files per scope, its events, our hook command.
- ``jsonedit``: format-preserving edits of a JSON text (others' bytes untouched).
- ``registration``: our hook entries merged into or taken out of a config's text.
- ``receipts``: the install receipt (what a `setup apply` did and how to undo it), built and checked.
- ``shapes``: the hosts' hook output shapes, to validate a probe's output.
- ``probe``: the synthetic hook inputs and the harness status verdicts.
- ``setup`` / ``doctor``: the effects of the two verbs (files, receipts, the host CLI, the hook probes).
"""
