"""The comfy_env drop-in's surface (python/comfy_env, docs/comfyui.md "The comfy_env drop-in"):
comfy-env 0.4.46's public names at its module paths, and what each does without a build. The
comparison with the real comfy-env wheel is comfy_env_dropin_has_comfy_env_0_4_46s_public_surface
(tests/integration/python)."""

from __future__ import annotations

import importlib
import inspect
import os
import stat
from pathlib import Path

import pytest

import comfy_env
from comfy_env import _api
from comfy_orch._shared import serializers
from comfy_orch.comfyui import register_nodes

PUBLIC = ["install", "setup_env", "register_nodes", "copy_files", "register_serializer"]
# Where comfy-env defines each name, which is where packs import it from.
WHERE = {"install": "comfy_env.install", "setup_env": "comfy_env.environment.setup",
         "copy_files": "comfy_env.environment.cache", "register_nodes": "comfy_env.isolation.wrap",
         "register_serializer": "comfy_env.isolation.workers._ipc_shared"}


def test_the_public_names_are_comfy_envs_at_its_module_paths() -> None:
    assert comfy_env.__all__ == PUBLIC
    assert comfy_env.register_nodes is register_nodes
    assert comfy_env.copy_files is _api.copy_files
    for name, module in WHERE.items():
        implementation = register_nodes if name == "register_nodes" else getattr(_api, name)
        assert getattr(importlib.import_module(module), name) is implementation, name


def test_the_signatures_are_comfy_envs() -> None:
    assert list(inspect.signature(_api.install).parameters) == [
        "config", "node_dir", "log_callback", "dry_run"]
    assert list(inspect.signature(_api.copy_files).parameters) == [
        "src", "dst", "pattern", "overwrite"]
    assert inspect.signature(_api.copy_files).parameters["pattern"].default == "*"


def test_another_name_is_comfy_envs_signpost_listing_the_api() -> None:
    with pytest.raises(AttributeError, match="no attribute 'IsolatedWorker'.*install, "
                                             "setup_env, register_nodes"):
        comfy_env.IsolatedWorker  # noqa: B018 - the read is the test


def test_register_serializer_registers_for_both_sides(no_serializers: None) -> None:
    comfy_env.register_serializer("Point", lambda p, recurse: [p.x])
    assert "Point" in serializers._by_type


def test_copy_files_copies_what_matches_and_keeps_existing_files(tmp_path: Path) -> None:
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "a.json").write_text("a")
    (tmp_path / "src" / "sub" / "b.json").write_text("b")
    (tmp_path / "src" / "c.txt").write_text("c")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "a.json").write_text("kept")
    assert comfy_env.copy_files(tmp_path / "src", tmp_path / "dst", "**/*.json") == 1
    assert (tmp_path / "dst" / "a.json").read_text() == "kept"
    assert (tmp_path / "dst" / "sub" / "b.json").read_text() == "b"
    assert not (tmp_path / "dst" / "c.txt").exists()
    assert comfy_env.copy_files(tmp_path / "src", tmp_path / "dst", "*.json", True) == 1
    assert (tmp_path / "dst" / "a.json").read_text() == "a"
    assert comfy_env.copy_files(tmp_path / "missing", tmp_path / "dst") == 0


def test_relative_paths_are_against_the_calling_scripts_directory() -> None:
    here = Path(__file__).parent
    assert comfy_env.copy_files("no-such-directory", "out") == 0
    assert not (here / "out").exists()


def comfyui_tree(tmp_path: Path) -> Path:
    pack = tmp_path / "ComfyUI" / "custom_nodes" / "MyPack"
    pack.mkdir(parents=True)
    return pack


def fake_cli(tmp_path: Path, script: str) -> str:
    """A comfy-orch program that prints its arguments, then runs `script`."""
    cli = tmp_path / "comfy-orch"
    cli.write_text("#!/bin/sh\necho \"args: $*\"\n" + script)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return str(cli)


def test_install_runs_comfy_orch_install_on_the_packs_comfyui_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = comfyui_tree(tmp_path)
    monkeypatch.delenv("COMFY_ORCH_DEPLOYMENT", raising=False)
    monkeypatch.setenv("ORCH_CLI", fake_cli(tmp_path, "echo built\n"))
    lines: list[str] = []
    # _api.install is comfy_env.install (importing comfy_env.install, the module comfy-env
    # defines it in, rebinds the package's name to that module).
    assert _api.install(node_dir=pack, log_callback=lines.append, dry_run=True)
    root = str(tmp_path / "ComfyUI")
    assert lines[1:] == ["args: install %s --dry-run" % root, "built", "\nInstallation complete!"]


def test_a_failed_install_raises_with_its_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = comfyui_tree(tmp_path)
    monkeypatch.setenv("COMFY_ORCH_DEPLOYMENT", str(tmp_path / "deployment.toml"))
    monkeypatch.setenv("ORCH_CLI", fake_cli(tmp_path, "exit 3\n"))
    with pytest.raises(RuntimeError, match=r"install .*deployment\.toml failed \(exit 3\)"):
        _api.install(node_dir=pack, log_callback=lambda line: None)


def test_setup_env_reports_each_env_and_never_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pack = comfyui_tree(tmp_path)
    monkeypatch.delenv("COMFY_ORCH_DEPLOYMENT", raising=False)
    monkeypatch.setattr(_api, "_envs_by_root", {})
    report = ('{"envs": [{"pack_dir": "%s", "node_dir": "nodes", "env": "mypack", '
              '"state": "missing"}]}' % pack)
    cli = fake_cli(tmp_path, "")
    Path(cli).write_text("#!/bin/sh\necho '%s'\n" % report)  # `comfy-orch envs ROOT --json`
    monkeypatch.setenv("ORCH_CLI", cli)
    comfy_env.setup_env(pack)
    err = capsys.readouterr().err
    assert "MyPack: 1 isolation env(s)" in err
    assert "nodes -> mypack  [missing -- run `comfy-orch install %s`]" % (
        tmp_path / "ComfyUI") in err
    monkeypatch.setenv("ORCH_CLI", str(tmp_path / "absent"))
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(_api, "_envs_by_root", {})
    comfy_env.setup_env(pack)
    assert "env states unknown: comfy-orch is not found" in capsys.readouterr().err


def test_a_pack_outside_a_comfyui_tree_needs_a_deployment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMFY_ORCH_DEPLOYMENT", raising=False)
    with pytest.raises(FileNotFoundError, match="not in a ComfyUI custom_nodes directory"):
        _api._pack_root(os.fspath(tmp_path))
