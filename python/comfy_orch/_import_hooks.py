"""Code that runs right after a module is first imported, without importing it here: a worker
must not pay for (or start) what its pack never uses (docs/python.md). Used for logging's handler
and for ComfyUI's progress and interrupt hooks, which a pack may import inside a node's call."""

import sys


def after_import(name, callback):
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

    def __init__(self, name, callback):
        self._name, self._callback = name, callback

    def find_spec(self, name, path=None, target=None):
        if name != self._name:
            return None
        for finder in [f for f in sys.meta_path if f is not self]:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenCall(spec.loader, self)
        return spec

    def executed(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
            try:
                self._callback(module)
            except Exception:  # a hook of ours must never fail the pack's import
                pass


class _ThenCall:
    """The module's own loader, plus the watcher's callback after exec_module; everything else
    (source, resources, reload) is the loader's."""

    def __init__(self, loader, watch):
        self._loader, self._watch = loader, watch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._watch.executed(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
