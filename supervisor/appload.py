"""Loading the user's app in the supervisor, and loading it again on SIGHUP.

The supervisor imports the app once at boot (a failure is a boot error, not a respawn loop),
and forks workers from it. On SIGHUP it imports the app's own modules afresh (the modules
loaded since boot that are plain .py files outside the standard library, site-packages and
tinyjobs), so the replacement workers run fresh code. A reload that fails to import keeps the
running app and workers."""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
from types import ModuleType

from tinyjobs.app import App

from .config import BootError

_LIBRARY_DIRS = tuple(
    os.path.realpath(p)
    for p in {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)
_TINYJOBS_DIR = os.path.realpath(os.path.dirname(importlib.import_module("tinyjobs").__file__ or ""))


class AppLoader:
    """Loads `module:attr` (the current directory importable) with the store URL override."""

    def __init__(self, spec: str, url: str | None) -> None:
        module, _, attr = spec.partition(":")
        if not module or not attr:
            raise BootError(f"--app {spec!r}: expected MODULE:ATTR, such as myproject.jobs:app", 2)
        self.spec, self.module, self.attr, self.url = spec, module, attr, url
        self._baseline = set(sys.modules)

    def load(self) -> App:
        """Import the app; BootError naming the cause when it cannot be."""
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(self.module)
        except Exception as err:
            raise BootError(
                f"--app {self.spec!r}: cannot import {self.module!r}: {type(err).__name__}: {err}"
            ) from None
        app = getattr(module, self.attr, None)
        if not isinstance(app, App):
            raise BootError(f"--app {self.spec!r}: {self.module}.{self.attr} is not a tinyjobs.App")
        if self.url:
            app.url = self.url
            app._store = None  # open on the URL given on the command line
        if app.url.startswith("memory:"):
            raise BootError(
                "memory:// lives in one process; the supervisor needs a shared store "
                "(sqlite:///file.db, postgresql://..., redis://...)",
                2,
            )
        return app

    def reload(self) -> App:
        """Import the app's own modules afresh and return the new app; on any failure the old
        modules are put back and BootError is raised (the caller keeps the old app)."""
        purged = {name: mod for name, mod in sys.modules.items() if self._is_user_module(name, mod)}
        for name in purged:
            del sys.modules[name]
        importlib.invalidate_caches()
        try:
            return self.load()
        except BootError:
            for name in [n for n in sys.modules if n not in self._baseline]:
                if self._is_user_module(name, sys.modules[name]):
                    del sys.modules[name]
            sys.modules.update(purged)
            raise

    def _is_user_module(self, name: str, module: ModuleType | None) -> bool:
        if name in self._baseline or module is None:
            return False
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            return False  # extension modules cannot be imported twice in one process
        real = os.path.realpath(path)
        return not real.startswith(_TINYJOBS_DIR + os.sep) and not any(
            real.startswith(d + os.sep) for d in _LIBRARY_DIRS
        )
