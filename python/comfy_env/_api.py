"""comfy-env 0.4.46's public API, answered by comfy-orch (docs/comfyui.md, "The comfy_env
drop-in"). This package's modules re-export these at comfy-env's own module paths, so a pack's
install.py, prestartup_script.py and __init__.py run unchanged:

- install(): builds the calling pack's envs with comfy-orch's env manager
  (`comfy-orch install <ComfyUI root>`);
- setup_env(): prints each of the pack's envs and its state, as comfy-env's does, and never
  raises on a working tree;
- copy_files(): copies into ComfyUI's input/, output/, temp/ or user/ (through folder_paths, as
  comfy-env resolves them) or any path, relative paths against the calling script's directory;
- register_serializer(): a pack's own type crosses between a worker and ComfyUI's process as
  the pack's serialized payload (comfy_orch/_shared/serializers.py).

Nothing here imports comfy-env or runs at import: a prestartup script pays only for what it
calls. register_nodes() is comfy_orch.comfyui's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from comfy_orch._shared import serializers
from comfy_orch.comfyui._runtime import comfyui_root

_PUBLIC = ("install", "setup_env", "register_nodes", "copy_files", "register_serializer")
# `comfy-orch envs <root> --json` (its JSON), once per ComfyUI tree and process.
_envs_by_root: dict[str, Any] = {}


def _caller_dir(depth: int) -> Path:
    """The directory of the script `depth` frames up (comfy-env reads the caller's file)."""
    path = sys._getframe(depth + 1).f_globals.get("__file__")
    return Path(os.path.abspath(path)).parent if path else Path.cwd()


def comfy_orch_cli() -> str:
    """The comfy-orch program: the one that launched this ComfyUI ($ORCH_CLI), else beside the
    worker it names, else on PATH."""
    candidates = [os.environ.get("ORCH_CLI")]
    worker = os.environ.get("ORCH_WORKER_EXECUTABLE")
    if worker:
        candidates.append(os.path.join(os.path.dirname(worker), "comfy-orch"))
    candidates.append(shutil.which("comfy-orch"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError("comfy-orch is not found: start ComfyUI with `comfy-orch launch`, or "
                            "put comfy-orch on PATH")


def _pack_root(node_dir: str | os.PathLike[str]) -> str:
    """What comfy-orch's commands take for the pack's envs: $COMFY_ORCH_DEPLOYMENT when set (as
    ComfyUI's host uses it), else the ComfyUI tree the pack lives in."""
    if os.environ.get("COMFY_ORCH_DEPLOYMENT"):
        return os.environ["COMFY_ORCH_DEPLOYMENT"]
    root = comfyui_root(str(node_dir))
    if root is None:
        raise FileNotFoundError("%s is not in a ComfyUI custom_nodes directory, so comfy-orch "
                                "cannot tell which ComfyUI its envs belong to" % node_dir)
    return root


def install(config: object = None, node_dir: str | os.PathLike[str] | None = None,
            log_callback: Callable[[str], object] | None = None, dry_run: bool = False) -> bool:
    """Builds the calling pack's envs (every env of its ComfyUI tree that is missing, broken or
    stale) with `comfy-orch install <ComfyUI root>`; True when it succeeded. `config` is
    accepted for comfy-env's signature: comfy-orch reads every manifest of the tree."""
    pack = Path(node_dir) if node_dir is not None else _caller_dir(1)
    log = log_callback or print
    root = _pack_root(pack)
    command = [comfy_orch_cli(), "install", root] + (["--dry-run"] if dry_run else [])
    log("[comfy-orch] %s" % " ".join(command))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace")
    assert process.stdout is not None  # stdout=PIPE
    for line in process.stdout:
        log(line.rstrip("\n"))
    if process.wait() != 0:
        raise RuntimeError("comfy-orch install %s failed (exit %d): the lines above say why"
                           % (root, process.returncode))
    log("\nInstallation complete!")
    return True


def _envs(root: str) -> Any:
    if root not in _envs_by_root:
        done = subprocess.run([comfy_orch_cli(), "envs", root, "--json"], capture_output=True,
                              text=True, errors="replace", timeout=300)
        report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
        if report is None:
            raise RuntimeError((done.stderr or done.stdout).strip() or
                               "comfy-orch envs exited %d" % done.returncode)
        _envs_by_root[root] = report
    return _envs_by_root[root]


def setup_env(node_dir: str | os.PathLike[str] | None = None) -> None:
    """comfy-env's prestartup report: one line per env of the pack with where it lives and its
    state, and the command that builds a missing one. Never raises: a report that cannot be
    made says why on its line."""
    pack = Path(node_dir) if node_dir is not None else _caller_dir(1)
    name = pack.name
    try:
        report = _envs(_pack_root(pack))
        mine = [e for e in report.get("envs", [])
                if os.path.realpath(e.get("pack_dir", "")) == os.path.realpath(pack)]
    except Exception as exc:  # noqa: B902 - a prestartup script must not fail on a report
        print("[comfy-orch] %s: env states unknown: %s" % (name, exc), file=sys.stderr)
        mine = None
    if mine is not None and not mine:
        print("[comfy-orch] %s: no isolation envs" % name, file=sys.stderr)
    elif mine:
        print("[comfy-orch] %s: %d isolation env(s):" % (name, len(mine)), file=sys.stderr)
        for e in mine:
            state = e.get("state", "?")
            fix = "" if state == "ok" else " -- run `comfy-orch install %s`" % _pack_root(pack)
            print("[comfy-orch]   %s -> %s  [%s%s]" % (e.get("node_dir"), e.get("path") or
                                                     e.get("env"), state, fix), file=sys.stderr)
    print("[comfy-orch] prestartup complete", file=sys.stderr, flush=True)


_FOLDERS = {"input": "get_input_directory", "output": "get_output_directory",
            "temp": "get_temp_directory", "user": "get_user_directory"}


def _through_folder_paths(dst: object) -> Path | None:
    """A relative str whose first segment is input, output, temp or user, resolved through
    ComfyUI's folder_paths (so --input-directory and the like are honoured), else None."""
    if not isinstance(dst, str) or os.path.isabs(dst):
        return None
    first, _, rest = dst.replace("\\", "/").partition("/")
    if first not in _FOLDERS:
        return None
    try:
        import folder_paths
    except ImportError:
        return None
    base = getattr(folder_paths, _FOLDERS[first], None)
    return Path(base()) / rest if callable(base) else None


def copy_files(src: str | os.PathLike[str], dst: str | os.PathLike[str], pattern: str = "*",
               overwrite: bool = False) -> int:
    """Copies the files of `src` matching `pattern` (a glob, "**/*" for all) into `dst`, keeping
    their relative paths; existing files stay unless `overwrite`. Returns how many were copied
    (0 when `src` does not exist)."""
    here = _caller_dir(1)

    def resolve(p: str | os.PathLike[str]) -> Path:
        path = Path(p)
        return path if path.is_absolute() else here / path

    target = _through_folder_paths(dst) or resolve(dst)
    source = resolve(src)
    if not source.exists():
        return 0
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for f in source.glob(pattern):
        if f.is_file():
            out = target / f.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            if overwrite or not out.exists():
                shutil.copy2(f, out)
                copied += 1
    return copied


def register_serializer(type_name: str, serialize: serializers.Serialize,
                        deserialize: serializers.Deserialize | None = None,
                        tag: str | None = None) -> None:
    """A pack's own type, matched by class name (a base class's name matches through the MRO),
    crosses between processes as serialize(obj, recurse)'s JSON-safe payload and is rebuilt with
    deserialize(payload, recurse) where that side registered one."""
    serializers.register(type_name, serialize, deserialize, tag)


def signpost(name: str) -> AttributeError:
    """comfy-env's PEP 562 answer for a name outside its public API."""
    return AttributeError("module 'comfy_env' has no attribute %r; comfy-env's public API (what "
                          "comfy-orch answers) is: %s" % (name, ", ".join(_PUBLIC)))
