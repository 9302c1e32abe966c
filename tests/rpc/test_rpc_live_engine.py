"""The sidecar's hub on the live engine, in process: a change by another writer costs one catch-up,
snapshot notification included (the snapshot is computed from the state that catch-up folded)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopstate_protocol.intent import IntentTaskStart

from loopstate.rpc.subscriptions import Hub, Subscription
from loopstate.service.engine import Service
from loopstate.service.live import Live


class CountingService(Service):
    """A real Service that counts its catch-ups (every refresh of a stream, whoever asks)."""

    refreshes = 0

    def refresh(self, project, domain, stream):  # type: ignore[override]
        self.refreshes += 1
        return super().refresh(project, domain, stream)


def run_until(loop: asyncio.AbstractEventLoop, done, timeout: float = 20.0) -> None:
    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.01)
    loop.run_until_complete(wait())


def test_one_catch_up_per_change_for_a_snapshot_subscription(root: Path, data_dir: Path) -> None:
    service, other = CountingService(data_dir=data_dir), Service(data_dir=data_dir)
    service.execute(str(root), IntentTaskStart(label="a"), "a")
    loop = asyncio.new_event_loop()
    sent: list[tuple[str, dict]] = []
    with ThreadPoolExecutor(1) as worker:
        live = Live(service, worker, loop)
        assert live.available, "inotify is needed to see another writer's appends"
        hub = Hub(service, live, loop, lambda method, params: sent.append((method, params)), lambda: False)
        folded, _ = service.view(str(root), "intent", "tasks", None)
        project, domain = service.project(str(root)), service.domains["intent"]
        sub = Subscription(id="sub-1", topic="intent/tasks", root=str(root), project=project, domain=domain,
                           view="tasks", key=None, stream="intent", deliver="snapshot")
        hub.open(sub, folded.head())
        run_until(loop, lambda: live.catch_ups >= 1)  # the follow's own first catch-up
        worker.submit(lambda: None).result()
        hub.release(sub.id)
        for i, label in enumerate("bcd", start=2):
            before = service.refreshes
            other.execute(str(root), IntentTaskStart(label=label), label)
            run_until(loop, lambda: any(p["head"]["sequence"] == i for _, p in sent))
            loop.run_until_complete(asyncio.sleep(0.3))  # nothing more follows
            assert service.refreshes - before == 1, f"change {label}: {service.refreshes - before} catch-ups"
        hub.stop()
    loop.close()
    assert [[t["label"] for t in p["snapshot"]] for _, p in sent] == [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]
