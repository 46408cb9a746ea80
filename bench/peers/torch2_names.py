"""Two torch 2 names, for the peers on Debian 12's torch 1.13 (bench_peers' venv loads this module
from a .pth file; docs/performance.md, "Peers"). comfy-env 0.4.46 and pyisolate 0.10.2 move CPU
tensors with `Tensor.untyped_storage()` and `TypedStorage(..., _internal=True)`, which torch 2.0
added; torch 1.13 has the same objects under `Tensor.storage().untyped()` and a TypedStorage
without the keyword. Only those two names are added, after torch's own import, and only where
torch lacks them: nothing else of torch changes, and a process that never imports torch never
imports it because of this."""

import importlib.abc
import importlib.machinery
import sys


def _add_names(torch):
    if not hasattr(torch.Tensor, "untyped_storage"):
        torch.Tensor.untyped_storage = lambda self: self.storage().untyped()
        typed = torch.storage.TypedStorage
        new, init = typed.__new__, typed.__init__
        typed.__new__ = lambda cls, *a, _internal=False, **k: new(cls, *a, **k)
        typed.__init__ = lambda self, *a, _internal=False, **k: init(self, *a, **k)


class _AfterTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_add(module):
            exec_module(module)
            _add_names(module)
        spec.loader.exec_module = exec_then_add
        return spec


if "torch" in sys.modules:
    _add_names(sys.modules["torch"])
else:
    sys.meta_path.insert(0, _AfterTorch())
