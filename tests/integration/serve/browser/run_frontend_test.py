"""The frontend browser test's driver (docs/serve.md, "The frontend"): a ComfyUI tree (the test
ComfyUI, copied) with this directory's Python pack in custom_nodes and the native example packs,
and no user settings (the page's first visit, which opens the template browser), its env a venv
over this python3 (or --python's), `comfy-orch serve` on it, frontend_test.mjs
driving the official frontend in Debian's Chromium against it, then check_frontend_types.mjs
checking what the page received against the frontend's published TypeScript types.

    python3 run_frontend_test.py --comfy-orch PATH --comfyui TREE --packs DIR --out DIR

--serve-only starts the server, prints its URL and waits (to look at the page by hand)."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def first_visit(tree):
    """A first visit without the templates dialog that a new user closes by hand (the launch
    test's; this one's page opens that dialog, and frontend_test.mjs checks it)."""
    user = os.path.join(tree, "user", "default")
    os.makedirs(user, exist_ok=True)
    with open(os.path.join(user, "comfy.settings.json"), "w") as f:
        json.dump({"Comfy.TutorialCompleted": True}, f)


def write_tree(work, comfyui, packs):
    """The ComfyUI tree and the deployment over it; returns the deployment's path."""
    tree = os.path.join(work, "ComfyUI")
    shutil.copytree(comfyui, tree, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(HERE, "custom_nodes"), os.path.join(tree, "custom_nodes"),
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    deployment = os.path.join(work, "deployment.toml")
    native = [os.path.join(packs, p) for p in ("ComfyUI-ImageOps", "ComfyUI-SimSampler")]
    with open(deployment, "w") as f:
        f.write('[host]\ndevice = "sim"\n\n[host.sim]\ncapacity = "2GiB"\n\n'
                '[comfyui]\nroot = %s\n\n[env]\nroot = %s\n\n'
                '[packs]\npaths = %s\ncustom_nodes = %s\n\n'
                '[workers]\nhandshake_timeout = "60s"\n\n[shm]\npinned_pool_size = "64MiB"\n'
                % (json.dumps(tree), json.dumps(os.path.join(work, "envs")),
                   json.dumps(native), json.dumps(os.path.join(tree, "custom_nodes"))))
    return deployment


def make_venvs(comfy_orch, deployment, python):
    """A venv over `python` for every Python env of the deployment, as run-example does."""
    listed = subprocess.run([comfy_orch, "envs", deployment, "--json"], check=True,
                            capture_output=True, text=True)
    for env in json.loads(listed.stdout)["envs"]:
        if env["kind"] == "python" and env["state"] == "missing":
            subprocess.run([python, "-m", "venv", "--system-site-packages",
                            "--without-pip", env["path"]], check=True)


def start_serve(comfy_orch, deployment, log):
    server = subprocess.Popen([comfy_orch, "serve", deployment, "--port", "0",
                               "--no-control-socket"], stdout=subprocess.PIPE, stderr=log,
                              text=True)
    for line in server.stdout:
        if "listening on " in line:
            return server, line.split("listening on ", 1)[1].strip()
    server.wait()
    raise SystemExit("serve never listened (exit %s); its log is %s" % (server.returncode,
                                                                        log.name))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comfy-orch", required=True)
    parser.add_argument("--comfyui", required=True, help="the test ComfyUI tree to copy")
    parser.add_argument("--packs", required=True, help="examples/packs")
    parser.add_argument("--out", required=True, help="screenshots and logs go here")
    parser.add_argument("--serve-only", action="store_true")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter the Python pack's env is made from (a sanitized "
                             "build's: docs/sanitizers.md)")
    a = parser.parse_args()
    missing = [tool for tool in ("node", "/usr/bin/chromium") if shutil.which(tool) is None]
    if missing:
        print("cannot run: %s missing; run ./scripts/install-deps" % ", ".join(missing))
        return 1
    for key in ("comfy_orch", "comfyui", "packs", "out"):
        setattr(a, key, os.path.abspath(getattr(a, key)))
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="orch-frontend-")
    try:
        deployment = write_tree(work, a.comfyui, a.packs)
        make_venvs(a.comfy_orch, deployment, a.python)
        with open(os.path.join(a.out, "serve.log"), "w") as log:
            server, url = start_serve(a.comfy_orch, deployment, log)
            try:
                if a.serve_only:
                    print(url, work, flush=True)
                    server.wait()
                    return 0
                test = subprocess.run(["node", os.path.join(HERE, "frontend_test.mjs"), url,
                                       a.out, os.path.join(work, "ComfyUI")], timeout=300)
                if test.returncode != 0:
                    return test.returncode
                types = subprocess.run(["node", os.path.join(HERE, "check_frontend_types.mjs"),
                                        os.path.join(a.out, "captured.json"), a.out],
                                       timeout=300)
                return types.returncode
            finally:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    server.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
