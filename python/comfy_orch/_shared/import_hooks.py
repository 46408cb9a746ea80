"""Code that runs right after a module is first imported, without importing it here: a worker
must not pay for (or start) what its pack never uses (docs/python.md). Used for logging's handler
and for ComfyUI's progress and interrupt hooks, which a pack may import inside a node's call, and
by the ComfyUI canary (comfyui/check.py)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType


def after_import(name: str, callback: Callable[[ModuleType], object]) -> None:
    """callback(module) now when `name` is imported already, else right after it is."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    else:
        sys.meta_path.insert(0, _Watch(name, callback))


class _Watch:
    """A meta path finder for one name: it asks the finders after it, as the import system
    would, and wraps the loader they give so the callback runs once the module executed. It
    stays until then: a find_spec that never imports (importlib.util.find_spec) must not use it
    up."""

    def __init__(self, name: str, callback: Callable[[ModuleType], object]) -> None:
        self._name, self._callback = name, callback
        # Set while this finder asks the others: a finder that asks every finder in turn (as
        # this one does; a pack's own hook may) asks this one again, which then answers None
        # instead of recursing until the stack runs out.
        self._asking = False

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != self._name or self._asking:
            return None
        self._asking = True
        try:
            for finder in [f for f in sys.meta_path if f is not self]:
                find = getattr(finder, "find_spec", None)
                spec: ModuleSpec | None = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._asking = False
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            # Not a Loader subclass: what it does not define is the wrapped loader's own.
            spec.loader = _ThenCall(spec.loader, self)  # type: ignore[assignment]
        return spec

    def executed(self, module: ModuleType) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
            try:
                self._callback(module)
            except Exception:  # a hook of ours must never fail the pack's import
                pass


class _ThenCall:
    """The module's own loader, plus the watcher's callback after exec_module; everything else
    (source, resources, reload) is the loader's."""

    def __init__(self, loader: Loader, watch: _Watch) -> None:
        self._loader, self._watch = loader, watch

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._watch.executed(module)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)
