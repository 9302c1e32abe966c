"""The JSON-RPC method names of the loopstate sidecar.

Requests (client to server) are answered exactly once; notifications (server to
client) are pushed for subscriptions. The names are part of the protocol: never
renamed, never reused for another meaning.
"""

from __future__ import annotations

EXECUTE = "loopstate/execute"
"""Request: apply one command to one project (ExecuteParams -> ExecuteResult)."""

QUERY = "loopstate/query"
"""Request: one read of one project (QueryParams -> the query's result)."""

SUBSCRIBE = "loopstate/subscribe"
"""Request: follow a topic (SubscribeParams -> SubscribeResult)."""

UNSUBSCRIBE = "loopstate/unsubscribe"
"""Request: stop following (UnsubscribeParams -> UnsubscribeResult)."""

CHANGED = "loopstate/changed"
"""Notification, server to client: a subscribed topic moved (ChangedNotification)."""

STREAM_ERROR = "loopstate/streamError"
"""Notification, server to client: a subscribed stream cannot be read (StreamErrorNotification)."""

HISTORY_ALARM = "loopstate/historyAlarm"
"""Notification, server to client: a stream's newest signed checkpoint does not extend the history
this server saw, or the stream was purged (HistoryAlarmNotification)."""

REQUESTS = (EXECUTE, QUERY, SUBSCRIBE, UNSUBSCRIBE)
NOTIFICATIONS = (CHANGED, STREAM_ERROR, HISTORY_ALARM)

# The experimental capability key under which `initialize` advertises loopstate.
CAPABILITY = "loopstate"
