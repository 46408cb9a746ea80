"""`comfy-orch launch` over a real ComfyUI tree, driven as a user's browser drives it (run by
test_comfyui_host.cpp when ORCH_COMFYUI_ROOT names a tree):

    python3 launch_real_comfyui.py COMFY_ORCH TREE PYTHON ENV_ROOT LOG

TREE holds the test packs in custom_nodes/ and links to the real tree's files; ComfyUI's own
main.py serves it on a free loopback port (--base-directory TREE: folder_paths would otherwise
follow the links back to the real tree). Prompts go in through POST /prompt and their results
come back from GET /history, so ComfyUI's own validation and executor run the packs' proxies.
Prints one line, RESULT {json}, and exits 0; any failure exits 1 with the launch log."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

COMFY_ORCH, TREE, PYTHON, ENV_ROOT, LOG = sys.argv[1:6]
# Generous bounds for a start and a prompt on 2 loaded cores; reaching them is a failure, never
# a pass: nothing here depends on how fast it goes.
START_DEADLINE_S, PROMPT_DEADLINE_S = 300, 120
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    with _direct.open(request, timeout=60) as reply:
        return json.loads(reply.read())


def fail(why):
    with open(LOG, errors="replace") as f:
        sys.stderr.write(f.read()[-20000:])
    sys.stderr.write("\nFAILED: %s\n" % why)
    sys.exit(1)


def run(url, launch, prompt):
    try:
        queued = ask(url + "/prompt", {"prompt": prompt})
    except urllib.error.HTTPError as e:
        fail("POST /prompt refused it: %s %s" % (e.code, e.read().decode(errors="replace")))
    prompt_id = queued["prompt_id"]
    deadline = time.monotonic() + PROMPT_DEADLINE_S
    while time.monotonic() < deadline and launch.poll() is None:
        entry = ask(url + "/history/" + prompt_id).get(prompt_id, {})
        status = entry.get("status", {})
        if status.get("completed"):
            return entry
        if status.get("status_str") == "error":
            fail("the prompt failed: %s" % json.dumps(status))
        time.sleep(0.2)
    fail("prompt %s did not complete" % prompt_id)


def main():
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    with open(LOG, "w") as log:
        launch = subprocess.Popen(
            [COMFY_ORCH, "launch", TREE, "--python", PYTHON, "--", "--cpu", "--port", str(port),
             "--base-directory", TREE], stdout=log, stderr=subprocess.STDOUT, cwd="/",
            env=dict(os.environ, ORCH_ENV_ROOT=ENV_ROOT, ORCH_LOG_LEVEL="info"))
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        info = None
        while info is None:
            if launch.poll() is not None:
                fail("comfy-orch launch exited with %s before serving" % launch.returncode)
            if time.monotonic() > deadline:
                fail("ComfyUI did not serve /object_info")
            try:
                info = ask(url + "/object_info")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        result = {"classes": sorted(n for n in info if n.startswith("Demo")),
                  "gain_info": info.get("DemoV3Gain")}
        crossed = run(url, launch, {
            "1": {"class_type": "DemoGradient", "inputs": {"width": 8, "height": 4}},
            "2": {"class_type": "DemoInvert", "inputs": {"image": ["1", 0]}},
            "3": {"class_type": "DemoViewer", "inputs": {"image": ["2", 0]}},
            "4": {"class_type": "DemoMean", "inputs": {"image": ["2", 0]}}})
        result["viewer_ui"] = crossed["outputs"].get("3")
        if "DemoV3Adjust" in info:  # ComfyUI 0.8's dynamic inputs, through its own executor
            adjusted = run(url, launch, {
                "1": {"class_type": "DemoGradient", "inputs": {"width": 4, "height": 2}},
                "2": {"class_type": "DemoV3Adjust",
                      "inputs": {"image": ["1", 0], "op": "scale", "op.factor": 3.0}}})
            result["adjust_ui"] = adjusted["outputs"].get("2")
        print("RESULT " + json.dumps(result), flush=True)
    finally:
        launch.send_signal(signal.SIGTERM)
        try:
            launch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            launch.kill()
            launch.wait()


main()
