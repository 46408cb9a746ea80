"""comfy-orch inside ComfyUI's process (docs/comfyui.md).

A pack's __init__.py does, exactly as with comfy-env:

    from comfy_orch.comfyui import register_nodes   # or: from comfy_env import register_nodes
    NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()

Discovery is comfy-env's: <pack>/nodes/comfy-env.toml (the whole nodes/ directory is one env), or
<pack>/nodes/<subdir>/comfy-env.toml for subdirectories not starting with '.' or '_'. An env that
runs gives proxy classes built from its worker's schemas, and the parent never imports its code.
A node directory without a manifest is imported in-process, as comfy-env does; one whose env is
not built is imported in-process too, with one loud line naming why and the fix. One whose
worker failed to import the pack is never imported here: its error (the exception and where in
the pack) is logged, and its nodes are missing, as ComfyUI shows a pack that failed to import.

One host runtime serves the whole ComfyUI process: the first register_nodes() starts it over
ComfyUI's custom_nodes directory (or $COMFY_ORCH_DEPLOYMENT), and it stops at exit.

The ComfyUI side's package: what runs inside ComfyUI's process. The host's answers are JSON and
ComfyUI's objects are not type-checked here: both are Any."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from typing import Any

from .._shared import pack_frames
from ..host import Host
from . import _proxies, _proxies_v3, _routes, _runtime
from ._proxies import WorkerObject, build_proxy
from ._proxies_v3 import build_v3_proxy

__all__ = ["register_nodes", "WorkerObject"]

_log = logging.getLogger("comfy_orch")


def _node_dirs(nodes_dir: str) -> list[tuple[str, bool]]:
    """comfy-env's discovery: [(directory, has_manifest)] for nodes/ itself when it has a
    manifest, else for every nodes/<subdir> package."""
    if os.path.isfile(os.path.join(nodes_dir, "comfy-env.toml")):
        return [(nodes_dir, True)]
    found = []
    for name in sorted(os.listdir(nodes_dir)):
        path = os.path.join(nodes_dir, name)
        if name.startswith((".", "_")) or not os.path.isdir(path):
            continue
        manifest = os.path.isfile(os.path.join(path, "comfy-env.toml"))
        if manifest or os.path.isfile(os.path.join(path, "__init__.py")):
            found.append((path, manifest))
    if not found and os.path.isfile(os.path.join(nodes_dir, "__init__.py")):
        found.append((nodes_dir, False))
    return found


def _import_in_process(caller_package: str | None, pack_dir: str,
                       node_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The directory as a submodule of the pack's package, as ComfyUI would import it."""
    relative = os.path.relpath(node_dir, pack_dir).replace(os.sep, ".")
    module = importlib.import_module("." + relative, package=caller_package)
    return (dict(getattr(module, "NODE_CLASS_MAPPINGS", {}) or {}),
            dict(getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}) or {}))


def _proxy(host: Host, name: str, schema: dict[str, Any]) -> type:
    """A V3 proxy for a class that is V3 in its worker, where this ComfyUI has comfy_api; a V1
    proxy otherwise (every ComfyUI runs V1 classes)."""
    io = _proxies_v3.available() if schema.get("api_version") == 3 else None
    return build_v3_proxy(io, host, name, schema) if io is not None else build_proxy(
        host, name, schema)


def register_nodes(nodes_package: str = "nodes") -> tuple[dict[str, Any], dict[str, Any]]:
    """(NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS) for the calling pack."""
    frame = inspect.stack()[1]
    module = inspect.getmodule(frame.frame)
    caller_package = module.__name__ if module is not None else None
    pack_dir = os.path.dirname(os.path.abspath(frame.filename))
    nodes_dir = os.path.join(pack_dir, nodes_package)
    mappings: dict[str, Any] = {}
    display: dict[str, Any] = {}
    if not os.path.isdir(nodes_dir):
        _log.warning("[comfy-orch] %s: no %s/ directory, so no nodes", pack_dir, nodes_package)
        return mappings, display
    dirs = _node_dirs(nodes_dir)
    host = _runtime.host(pack_dir) if any(m for _, m in dirs) else None
    state: dict[str, Any] = host.nodes() if host is not None else {}
    envs = {os.path.realpath(e["node_dir"]): e for e in state.get("envs", [])}
    workers = {w["env"]: w for w in state.get("workers", [])}
    reasons = {s["env"]: s["reason"] for s in state.get("skipped", [])}
    for node_dir, manifest in dirs:
        env: Any = envs.get(os.path.realpath(node_dir)) if manifest else None  # JSON or None
        classes = {name: schema for name, schema in state.get("classes", {}).items()
                   if env is not None and schema.get("env") == env["env"]}
        if host is not None and env is not None:  # the pack's ROUTES, answered by its worker
            _routes.serve(host, [r for r in state.get("routes", []) if r.get("env") == env["env"]])
        if classes:
            assert host is not None  # classes come from its state
            for name, schema in classes.items():
                mappings[name] = _proxy(host, name, schema)
                shown = _proxies.node_info(schema).get("display_name")
                display[name] = shown if isinstance(shown, str) else name
            _log.info("[comfy-orch] %s: %d nodes isolated in env %s", node_dir, len(classes),
                      env["env"])
            continue
        worker = workers.get(env["env"]) if env is not None else None
        if worker is not None and worker.get("state") != "ready":
            # The env exists and its worker ran the pack, which failed: importing it here would
            # run it in the wrong environment, silently. comfy-env falls back only for an env
            # that does not exist.
            _log.error("[comfy-orch] %s: IMPORT FAILED in its worker (env %s): %s. Its nodes are "
                       "not loaded; fix the pack or its env (`comfy-orch doctor %s`), then "
                       "restart ComfyUI.", node_dir, env["env"],
                       worker.get("error") or "the worker stopped (%s)" % worker.get("state"),
                       _runtime.comfyui_root(pack_dir) or "<deployment>")
            continue
        if worker is not None:
            _log.warning("[comfy-orch] %s: its worker (env %s) serves no node classes",
                         node_dir, env["env"])
            continue
        if manifest:
            why = (reasons.get(env["env"]) or env.get("detail") or "its env is " + env["state"]
                   if env is not None else "the deployment has no env for it")
            fix = "" if "comfy-orch install" in why else " Build its env with `comfy-orch " \
                "install %s%s`." % (_runtime.comfyui_root(pack_dir) or "<deployment>",
                                    " " + env["env"] if env is not None else "")
            _log.warning("[comfy-orch] %s: not isolated: %s; importing it in-process.%s",
                         node_dir, why, fix)
        try:
            m, d = _import_in_process(caller_package, pack_dir, node_dir)
        except Exception as exc:  # noqa: BLE001 - as comfy-env: this directory's nodes are
            # missing, and the pack's other directories (and their envs) still serve theirs.
            _log.error("[comfy-orch] %s: IMPORT FAILED in-process%s: %s: %s%s. Its nodes are "
                       "not loaded; the pack's other node directories are. %s, then restart "
                       "ComfyUI.", node_dir,
                       " (its env %s is not built)" % env["env"] if env is not None else "",
                       type(exc).__name__, exc, pack_frames.where(exc, pack_dir),
                       "Build its env with `comfy-orch install %s %s`" % (
                           _runtime.comfyui_root(pack_dir) or "<deployment>", env["env"])
                       if env is not None else "Fix the import")
            continue
        mappings.update(m)
        display.update(d)
    return mappings, display
