"""The official frontend in Chromium against a gateway (docs/fleet.md, "The frontend at the
gateway"): the serve browser test's ComfyUI tree and deployment (its Python pack with a web
directory, a route and an example workflow, and the native example packs;
tests/integration/serve/browser/run_frontend_test.py), two `comfy-orch serve` hosts on it with
the fleet's secret, and `comfy-orch gateway` in front of them. host-0 or host-1 is made busy
first with a long prompt queued at the gateway (a sampler of a model the page's workflow does not
use, so placement has no reason to wait for that host), then gateway_frontend_test.mjs opens the
page at the gateway and runs the workflow, which must land on the other host.

    python3 run_gateway_frontend_test.py --comfy-orch PATH --comfyui TREE --packs DIR --out DIR
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE_BROWSER = os.path.join(HERE, "..", "..", "serve", "browser")
sys.path.insert(0, SERVE_BROWSER)
import run_frontend_test as serve_driver  # noqa: E402  (the same tree, deployment and venvs)

SECRET = "gateway-browser-test-secret-0123456789abcdefghijklmnop"
# A long prompt for the first host, interrupted once the page is done: a sampler of 1000 steps
# of 600 ms (its inputs' largest) over a model (32 MiB) that the page's workflow (64 MiB) does
# not load.
BLOCKER = {
    "1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
    "2": {"class_type": "SimLoadModel", "inputs": {"size_mib": 32, "layers": 4}},
    "3": {"class_type": "SimSampler",
          "inputs": {"model": ["2", 0], "latent": ["1", 0], "steps": 1000, "step_ms": 600}},
    "4": {"class_type": "ImageChecksum", "inputs": {"image": ["3", 0]}},
}


def started(command, log, what):
    """`command` started, and the URL its 'listening on' line names."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    for line in process.stdout:
        if "listening on " in line:
            return process, line.split("listening on ", 1)[1].strip()
    process.wait()
    raise SystemExit("%s never listened (exit %s); its log is %s" % (what, process.returncode,
                                                                    log.name))


def get_json(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def wait_for(condition, what, bound_s=120):
    """Until `condition()` is true: a hang guard, never a timing the test depends on."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit("gave up waiting %d s for %s" % (bound_s, what))


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comfy-orch", required=True)
    parser.add_argument("--comfyui", required=True, help="the test ComfyUI tree to copy")
    parser.add_argument("--packs", required=True, help="examples/packs")
    parser.add_argument("--out", required=True, help="screenshots and logs go here")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter the Python pack's env is made from")
    a = parser.parse_args()
    missing = [tool for tool in ("node", "/usr/bin/chromium") if shutil.which(tool) is None]
    if missing:
        print("cannot run: %s missing; run ./scripts/install-deps" % ", ".join(missing))
        return 1
    for key in ("comfy_orch", "comfyui", "packs", "out"):
        setattr(a, key, os.path.abspath(getattr(a, key)))
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="orch-gateway-frontend-")
    processes = []
    try:
        deployment = serve_driver.write_tree(work, a.comfyui, a.packs)
        serve_driver.make_venvs(a.comfy_orch, deployment, a.python)
        secret = os.path.join(work, "fleet.secret")
        with open(secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(secret, 0o600)
        urls = []
        for i in range(2):
            log = open(os.path.join(a.out, "host-%d.log" % i), "w")
            host, url = started([a.comfy_orch, "serve", deployment, "--port", "0",
                                 "--no-control-socket", "--fleet-secret-file", secret],
                                log, "host-%d" % i)
            processes.append(host)
            urls.append(url)
        # The gateway's own user directory, on its first visit but past the tutorial (the
        # serve test checks the template browser a first visit opens).
        users = os.path.join(work, "gateway-user")
        with open(os.path.join(work, "fleet.toml"), "w") as f:
            f.write('[gateway]\nsecret_file = "fleet.secret"\nuser_directory = "gateway-user"\n\n')
            for url in urls:
                f.write('[[host]]\nurl = "%s"\n\n' % url)
        os.makedirs(os.path.join(users, "default"))
        with open(os.path.join(users, "default", "comfy.settings.json"), "w") as f:
            json.dump({"Comfy.TutorialCompleted": True}, f)
        log = open(os.path.join(a.out, "gateway.log"), "w")
        gateway, url = started([a.comfy_orch, "gateway", os.path.join(work, "fleet.toml"),
                                "--port", "0"], log, "the gateway")
        processes.append(gateway)
        wait_for(lambda: sum(h["up"] for h in get_json(url + "/orch/fleet")["hosts"]) == 2,
                 "both hosts up at the gateway")
        blocker = get_json(url + "/prompt", {"prompt": BLOCKER, "client_id": "blocker"})
        busy = wait_for(lambda: next((h["name"] for h in get_json(url + "/orch/fleet")["hosts"]
                                      if h["running"] == blocker["prompt_id"]), None),
                        "the long prompt to run on a host")
        print("the long prompt runs on %s" % busy, flush=True)
        test = subprocess.run(["node", os.path.join(HERE, "gateway_frontend_test.mjs"), url,
                               a.out, busy], timeout=400)
        get_json(url + "/interrupt", {"prompt_id": blocker["prompt_id"]})
        return test.returncode
    finally:
        for process in reversed(processes):
            stop(process)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
