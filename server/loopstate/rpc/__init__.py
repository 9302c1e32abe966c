"""The JSON-RPC front door: `loopstate serve`, a pygls LanguageServer on stdio.

``server`` builds the pygls server and its method table, ``dispatch`` is the
reader loop that answers every request exactly once, ``subscriptions`` pushes
changes (woken by the service's store watcher, ``service/watch``), ``transport``
is stdio with back-pressure.
"""
