"""The frontend browser test on a real ComfyUI under `comfy-orch launch` (docs/comfyui-fixture.md,
"Issue 56"): the tree ORCH_COMFYUI_ROOT names, copied, with this directory's Python pack in its
custom_nodes and the pack's env a venv over the tree's interpreter (ORCH_TEST_PYTHON, else the
tree's venv/bin/python); the tree's own main.py and server, with its own frontend package,
started by `comfy-orch launch ... -- --cpu`; then frontend_test.mjs drives the page in Debian's
Chromium as it does under serve, in its `launch` mode (workflow_launch.json: ComfyUI's own
EmptyImage where serve has its native example packs).

    python3 run_launch_frontend_test.py --comfy-orch PATH --out DIR

Without ORCH_COMFYUI_ROOT there is no real tree to run: it exits 77, which ctest counts as a skip
(SKIP_RETURN_CODE). The type check of run_frontend_test.py is not run: it holds serve's answers
to the frontend's published types, and ComfyUI's own answers are the reference serve follows."""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import run_frontend_test

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
# A real ComfyUI imports torch and its nodes before it serves: a generous bound on 2 loaded
# cores, whose reaching is a failure and never a pass.
START_DEADLINE_S = 300
# What of the real tree the copy leaves out: its interpreter, its models, what a run writes, and
# its custom_nodes (a developer's own packs would load beside the test's).
LEFT_OUT = ("venv", ".venv", ".git", "models", "custom_nodes", "user", "input", "output", "temp",
            "__pycache__")
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def copy_tree(real, work):
    tree = os.path.join(work, "ComfyUI")
    shutil.copytree(real, tree, symlinks=True, ignore=lambda d, names: [
        n for n in names if n in LEFT_OUT and (d == real or n == "__pycache__")])
    for name in ("custom_nodes", "input", "output", "temp"):
        os.makedirs(os.path.join(tree, name), exist_ok=True)
    shutil.copytree(os.path.join(HERE, "custom_nodes"), os.path.join(tree, "custom_nodes"),
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    run_frontend_test.first_visit(tree)
    return tree


def make_envs(comfy_orch, tree, python, env):
    """Each missing env a venv over `python` that sees what `python` sees: where it is itself a
    venv, as a real tree's is, --system-site-packages reaches only its base's, so a .pth adds
    its site-packages (as test_comfyui_host.cpp's launch test builds its envs). Returns the
    envs' names."""
    listed = subprocess.run([comfy_orch, "envs", tree, "--json"], check=True,
                            capture_output=True, text=True, env=env)
    sites = subprocess.run([python, "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
                           check=True, capture_output=True, text=True).stdout.split()
    names = []
    for found in json.loads(listed.stdout)["envs"]:
        names.append(found["env"])
        if found["kind"] != "python" or found["state"] != "missing":
            continue
        subprocess.run([python, "-m", "venv", "--system-site-packages", "--without-pip",
                        found["path"]], check=True)
        own = subprocess.run([os.path.join(found["path"], "bin", "python"), "-c",
                              "import site; print(site.getsitepackages()[0])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        with open(os.path.join(own, "orch_test_python.pth"), "w") as f:
            f.write("import site; " + "; ".join("site.addsitedir(%r)" % d for d in sites) + "\n")
    return names


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_nodes(url, launch, log_path):
    """Until ComfyUI's /object_info lists the pack's nodes; None if launch ended first."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline and launch.poll() is None:
        try:
            with _direct.open(url + "/object_info", timeout=60) as reply:
                if "BrowserSteps" in json.loads(reply.read()):
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        time.sleep(0.5)
    print("ComfyUI never listed BrowserSteps at %s/object_info (launch %s); its log is %s"
          % (url, "exited %s" % launch.returncode if launch.poll() is not None else "running",
             log_path))
    return None


def stop(launch):
    launch.send_signal(signal.SIGTERM)
    try:
        launch.wait(timeout=60)
    except subprocess.TimeoutExpired:
        launch.kill()
        launch.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comfy-orch", required=True)
    parser.add_argument("--out", required=True, help="screenshots and logs go here")
    a = parser.parse_args()
    real = os.environ.get("ORCH_COMFYUI_ROOT", "")
    if not real:
        print("skipped: ORCH_COMFYUI_ROOT names no real ComfyUI tree")
        return SKIP
    real = os.path.abspath(real)
    python = os.environ.get("ORCH_TEST_PYTHON") or os.path.join(real, "venv", "bin", "python")
    missing = [tool for tool in ("node", "/usr/bin/chromium", python) if shutil.which(tool) is None]
    if missing:
        print("cannot run: %s missing (node and chromium: ./scripts/install-deps; the tree's "
              "interpreter: ORCH_TEST_PYTHON)" % ", ".join(missing))
        return 1
    comfy_orch, out = os.path.abspath(a.comfy_orch), os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="orch-launch-frontend-")
    try:
        tree = copy_tree(real, work)
        env = dict(os.environ, ORCH_ENV_ROOT=os.path.join(work, "envs"), ORCH_LOG_LEVEL="info")
        envs = make_envs(comfy_orch, tree, python, env)
        port = free_port()
        url = "http://127.0.0.1:%d" % port
        log_path = os.path.join(out, "launch.log")
        with open(log_path, "w") as log:
            launch = subprocess.Popen(
                [comfy_orch, "launch", tree, "--python", python, "--", "--cpu", "--port",
                 str(port), "--listen", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT,
                cwd="/", env=env)
        try:
            if not wait_for_nodes(url, launch, log_path):
                return 1
            with open(log_path, errors="replace") as f:
                said = f.read()
            # The point of the test: the pack's nodes run in its worker, not in ComfyUI.
            isolated = ["nodes isolated in env %s" % name in said for name in envs]
            if not envs or not all(isolated):
                print("FAIL: the pack's nodes are not isolated in its env %s; the log is %s"
                      % (envs, log_path))
                return 1
            print("ok: the pack's nodes run in env %s under launch" % ", ".join(envs), flush=True)
            test = subprocess.run(["node", os.path.join(HERE, "frontend_test.mjs"), url, out,
                                   tree, "launch"], timeout=300)
            return test.returncode
        finally:
            stop(launch)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
