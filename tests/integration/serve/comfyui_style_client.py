"""A ComfyUI API client written the way ComfyUI's script_examples/websockets_api_example.py
works (urllib for the HTTP routes, python3-websocket for /ws), driven against a live
`comfy-orch serve` of the example deployment. Run by ctest (tests/integration/serve).

    comfyui_style_client.py <comfy-orch> <deployment> <prompt.json>

Starts the server on a free port, queues the prompt, follows it over the WebSocket until the
executing message for no node, reads /history, checks every shape the example relies on, then
stops the server with SIGTERM and checks it exits 0. Exit 0: all held.
"""
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import websocket  # Debian's python3-websocket


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def start(binary, deployment):
    proc = subprocess.Popen([binary, "serve", deployment, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on http://" not in line:
        proc.kill()
        fail("no 'listening on' line; stderr: " + proc.stderr.read())
    return proc, line.strip().rsplit("http://", 1)[1]


def post(address, route, body):
    data = json.dumps(body).encode("utf-8")
    req = urllib.request.Request("http://{}{}".format(address, route), data=data)
    try:
        with urllib.request.urlopen(req) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(address, route):
    with urllib.request.urlopen("http://{}{}".format(address, route)) as response:
        return json.loads(response.read())


def main():
    binary, deployment, prompt_file = sys.argv[1:4]
    with open(prompt_file) as f:
        prompt = json.load(f)
    proc, address = start(binary, deployment)
    try:
        client_id = str(uuid.uuid4())
        ws = websocket.WebSocket()
        ws.connect("ws://{}/ws?clientId={}".format(address, client_id), timeout=60)
        first = json.loads(ws.recv())
        if first["type"] != "status" or first["data"]["sid"] != client_id:
            fail("the first message is not status for this sid: {}".format(first))
        if first["data"]["status"]["exec_info"]["queue_remaining"] != 0:
            fail("queue not empty at start: {}".format(first))

        status, queued = post(address, "/prompt", {"prompt": prompt, "client_id": client_id})
        if status != 200 or set(queued) != {"prompt_id", "number", "node_errors"}:
            fail("POST /prompt answered {} {}".format(status, queued))
        prompt_id = queued["prompt_id"]
        if str(uuid.UUID(prompt_id)) != prompt_id:
            fail("prompt_id is not a UUID: " + prompt_id)

        seen = []
        while True:  # the example's loop: until executing with node None for our prompt
            out = ws.recv()
            if not isinstance(out, str):
                continue
            message = json.loads(out)
            seen.append(message["type"])
            if message["type"] == "executing":
                data = message["data"]
                if data["node"] is None and data["prompt_id"] == prompt_id:
                    break
        ws.close()
        for wanted in ("execution_start", "execution_cached", "executing", "execution_success"):
            if wanted not in seen:
                fail("no {} among {}".format(wanted, seen))
        if seen.index("execution_start") > seen.index("execution_cached"):
            fail("execution_cached before execution_start: {}".format(seen))

        history = get(address, "/history/" + prompt_id)
        entry = history.get(prompt_id)
        if entry is None:
            fail("no history for " + prompt_id)
        if entry["status"]["status_str"] != "success" or entry["status"]["completed"] is not True:
            fail("history status: {}".format(entry["status"]))
        if entry["prompt"][1] != prompt_id or entry["prompt"][2] != prompt:
            fail("history prompt item: {}".format(entry["prompt"][:2]))
        kinds = [m[0] for m in entry["status"]["messages"]]
        if kinds[0] != "execution_start" or kinds[-1] != "execution_success":
            fail("history messages: {}".format(kinds))
        if prompt_id not in get(address, "/history?max_items=1"):
            fail("/history?max_items=1 does not hold the newest prompt")
        if get(address, "/queue") != {"queue_running": [], "queue_pending": []}:
            fail("queue not empty after the prompt")
        info = get(address, "/object_info")
        for node in prompt.values():
            if node["class_type"] not in info:
                fail("/object_info lacks " + node["class_type"])

        status, refused = post(address, "/prompt", {"prompt": {"1": {"class_type": "NoSuchNode",
                                                                     "inputs": {}}}})
        if status != 400 or refused["error"]["type"] != "missing_node_type":
            fail("an unknown class was answered {} {}".format(status, refused))
        if set(refused["error"]) != {"type", "message", "details", "extra_info"}:
            fail("the error has other fields: {}".format(refused["error"]))
        print("ok: {} messages, history and refusals as ComfyUI's".format(len(seen)))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("serve did not stop within 30 s of SIGTERM")
    if code != 0:
        fail("serve exited {} after SIGTERM; stderr: {}".format(code, proc.stderr.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
