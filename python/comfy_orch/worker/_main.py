"""The worker's entry: `main` runs a Python pack's worker with the host's command line
(the package's docstring, comfy_orch/worker/__init__.py, says what it does)."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

from .._shared import abi, comfyui_args, pack_frames
from . import (_call, _comfyui_hooks, _crossing, _library, _messages, _output, _prompt_server,
               _routes, _schema, _torch_allocator, _torch_models, _v3, _web_server)

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    from . import _runner  # imported at run time once the handshake is under way

_OWN_FLAGS = ("--node-dir", "--pack-dir", "--comfyui-root", "--web-fd")


def _split_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    own, rest = {}, [argv[0]]
    i = 1
    while i < len(argv):
        if argv[i] in _OWN_FLAGS and i + 1 < len(argv):
            own[argv[i][2:].replace("-", "_")] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return own, rest


def _import_node_dir(node_dir: str, pack_dir: str) -> ModuleType:
    """The node directory as a package named after its place in the pack, so relative imports
    inside it work and two packs' `nodes` never collide in sys.modules."""
    init = os.path.join(node_dir, "__init__.py")
    if not os.path.isfile(init):
        raise ImportError("%s has no __init__.py exporting NODE_CLASS_MAPPINGS" % node_dir)
    rel = os.path.relpath(node_dir, os.path.dirname(pack_dir))
    name = "".join(c if c.isalnum() else "_" for c in rel)
    spec = importlib.util.spec_from_file_location(name, init,
                                                  submodule_search_locations=[node_dir])
    if spec is None or spec.loader is None:  # never for a .py file: the checker's question
        raise ImportError("%s cannot be imported" % init)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _node_specs(module: ModuleType, node_dir: str, pack_dir: str) -> list[_schema.NodeSpec]:
    """V1 classes from NODE_CLASS_MAPPINGS, V3 ones from there or from comfy_entrypoint()."""
    mappings = getattr(module, "NODE_CLASS_MAPPINGS", None)
    extension = _v3.entrypoint_classes(module)
    if not isinstance(mappings, dict) and not extension:
        raise ImportError("%s exports no NODE_CLASS_MAPPINGS dict and no comfy_entrypoint"
                          % node_dir)
    names = getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", None) or {}
    # What ComfyUI's loader sets on every class it loads: node_info's python_module.
    relative_module = "custom_nodes." + os.path.basename(os.path.normpath(pack_dir))
    for cls in list((mappings or {}).values()) + list(extension):
        if isinstance(cls, type):
            setattr(cls, "RELATIVE_PYTHON_MODULE", relative_module)
    specs: list[_schema.NodeSpec] = []
    for key, cls in (mappings or {}).items():
        specs.append(_v3.V3Spec(key, cls) if _v3.is_v3(cls)
                     else _schema.NodeSpec(key, cls, names.get(key)))
    known = {s.class_type for s in specs}
    for cls in extension:
        spec = _v3.V3Spec(None, cls)
        if spec.class_type not in known:
            specs.append(spec)
    return specs


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the worker with the host's command line; its exit status."""
    own, rest = _split_args(list(sys.argv if argv is None else argv))
    node_dir = own.get("node_dir")
    if not node_dir:
        sys.stderr.write("comfy_orch.worker: --node-dir is required (the host starts this "
                         "program; see comfy-orch-worker --help for the other flags)\n")
        return 64
    pack_dir = own.get("pack_dir") or os.path.dirname(node_dir)
    # The folder holding comfy_orch/ (this file is comfy_orch/worker/_main.py).
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    front = [p for p in (own.get("comfyui_root"), pack_dir, package_root) if p]
    # ComfyUI's tree first, even where PYTHONPATH already has it further back: its top-level
    # modules (nodes, server, utils, folder_paths) must win over same-named ones of the pack's.
    sys.path[:] = front + [p for p in sys.path if p not in front]
    os.chdir(pack_dir)
    env = "worker"
    if "--env" in rest[:-1]:
        env = rest[rest.index("--env") + 1]
    lib = _library.load()
    argv_c = (ctypes.c_char_p * (len(rest) + 1))(*[a.encode() for a in rest], None)
    # The handshake and the worker's memory set-up run on the library's thread while the pack
    # is imported here (docs/performance.md); numpy waits for the first tensor.
    status = ctypes.c_int32(0)
    started = lib.orch_worker_begin(len(rest), argv_c, ctypes.byref(status))
    if not started:
        return status.value
    runner: _runner.Runner | None = None
    failure: str | None = None
    try:
        _output.forward(lib)
        _messages.attach(lib)
        from ._runner import Runner
        comfyui_args.install()  # before the pack can import comfy.model_management
        if own.get("comfyui_root"):
            _comfyui_hooks.import_as_main_does(own["comfyui_root"])
        _prompt_server.install()  # ComfyUI's server exists before packs load; here too
        _torch_models.install()  # now or whenever the pack imports torch
        module = _import_node_dir(node_dir, pack_dir)
        specs = _node_specs(module, node_dir, pack_dir)
        declared = _routes.route_specs(module)  # the pack's ROUTES, served by ComfyUI's side
        web_fd = int(own["web_fd"]) if own.get("web_fd", "").isdigit() else None
        specs += declared + _web_server.route_specs(_prompt_server.registered_routes(), web_fd,
                                                    declared)
        specs.append(_crossing.ExportSpec(env))  # its objects, asked for by another env
        _comfyui_hooks.install_hooks()
        installed = _torch_allocator.install()
        if installed is not True and "torch" in sys.modules:
            lib.orch_worker_log(abi.LOG_DEBUG, ("torch keeps its own CUDA allocator: %s"
                                                 % installed).encode())
        runner = Runner(env, specs)
    except BaseException as exc:  # noqa: B902 - the host must hear why, then this env stops
        # The first line is the cause the host keeps (and ComfyUI's log shows): the exception
        # and where in the pack it was raised; the worker logs the traceback after it.
        import traceback
        failure = ("importing the Python pack in %s failed: %s: %s%s\n" % (
            node_dir, _call.qualified_name(type(exc)), " ".join(str(exc).split("\n")),
            pack_frames.where(exc, pack_dir)) +
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    nodes = ctypes.byref(runner.builder.node_set) if runner is not None else None
    error = failure.encode("utf-8", "replace") if failure is not None else None
    return int(lib.orch_worker_serve(started, nodes, error))
