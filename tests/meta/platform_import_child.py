"""Import every module of loopstate and loopstate_protocol as another OS would, and say what happened.

    platform_import_child.py list                   the modules, and the outside modules they load (real platform)
    platform_import_child.py import PLATFORM [nofcntl] [watch]

``import`` first loads, under the real platform, the outside modules that
``list`` reported (the standard library's own ``win32`` branches need
Windows' C modules, which no faking can give) and portalocker; then sets
``sys.platform`` to PLATFORM, makes ``fcntl`` unimportable with ``nofcntl``
(``sys.modules["fcntl"] = None``: any later ``import fcntl`` raises), and
imports each of loopstate's modules fresh. It prints one JSON object: the
modules that failed with their errors, the OS lock primitive chosen, and with
``watch`` whether a Watcher found a native observer on that platform.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import traceback

PACKAGES = ("loopstate", "loopstate_protocol")


def ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def every_module() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        names += [info.name for info in pkgutil.walk_packages(root.__path__, package + ".")]
    # ``python -m loopstate`` runs the CLI: importing its __main__ is running it, not loading it.
    return sorted(name for name in set(names) if not name.endswith(".__main__"))


def listing() -> None:
    modules = every_module()
    for name in modules:
        importlib.import_module(name)
    outside = sorted(name for name in sys.modules if not ours(name))
    print(json.dumps({"modules": modules, "outside": outside}))


def imports(platform: str, flags: list[str]) -> None:
    said = json.loads(sys.stdin.read())
    for name in said["outside"] + ["portalocker"]:
        try:
            importlib.import_module(name)
        except Exception:  # an outside module the real platform cannot load either: not ours to judge
            pass
    for name in [n for n in sys.modules if ours(n)]:
        del sys.modules[name]  # the listing itself loaded nothing of ours, but be sure
    sys.platform = platform
    if "nofcntl" in flags:
        sys.modules["fcntl"] = None  # type: ignore[assignment]
    failed = {}
    for name in said["modules"]:
        try:
            importlib.import_module(name)
        except BaseException:
            failed[name] = traceback.format_exc(limit=-3)
    result = {"failed": failed, "count": len(said["modules"]),
              "lock": getattr(sys.modules.get("loopstate.core.flock_wait"), "primitive", None).__name__}
    if "watch" in flags:
        import asyncio
        import logging

        from loopstate.service.watch import Watcher

        records: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("loopstate.service").addHandler(handler)
        loop = asyncio.new_event_loop()
        watcher = Watcher(loop, lambda folder, name: None)
        result["watch"] = {"available": watcher.available, "log": records}
        watcher.close()
        loop.close()
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1] == "list":
        listing()
    else:
        imports(sys.argv[2], sys.argv[3:])
