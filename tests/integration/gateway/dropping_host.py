"""A fleet host whose answer to POST /prompt is lost (test_gateway_restart.cpp): it reads the prompt,
queues and runs it, and then drops the connection without answering, as a host does whose network
fails after the request arrived. Otherwise it answers as serve does: its report, its events on the
WebSocket, /queue and /history/{id}, and a prompt_id it already holds refused with 400
prompt_id_known. Each POST /prompt's prompt_id is appended to POSTS_FILE, so the test can count
how often the gateway sent each prompt.

Usage: dropping_host.py PORT_FILE POSTS_FILE (the port is written to PORT_FILE once it listens).
"""
import asyncio
import json
import os
import sys

from aiohttp import web

REPORT = {
    "name": "dropping",
    "fingerprint": "sha256:" + "1" * 64,
    "fingerprint_parts": {"comfy-orch": "dropping"},
    "node_classes": ["TestSleep"],
    "resident_models": [],
    "free_device_bytes": 1 << 30,
    "running": False,
    "queued": 0,
}
streams = []
running = {}  # prompt_id -> queue item
history = {}  # prompt_id -> history entry


async def report(_request):
    return web.json_response(REPORT)


async def events(request):
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    streams.append(ws)
    await ws.send_str(json.dumps({"type": "status", "data": {"status": {}}}))
    async for _ in ws:
        pass
    streams.remove(ws)
    return ws


async def send_all(message):
    for ws in list(streams):
        try:
            await ws.send_str(json.dumps(message))
        except ConnectionError:
            pass


async def run(prompt_id, item):
    await asyncio.sleep(0.3)
    await send_all({"type": "execution_start", "data": {"prompt_id": prompt_id}})
    await send_all({"type": "executing", "data": {"node": "1", "prompt_id": prompt_id}})
    await asyncio.sleep(0.3)
    history[prompt_id] = {"prompt": item, "outputs": {},
                          "status": {"status_str": "success", "completed": True, "messages": []},
                          "meta": {}}
    del running[prompt_id]
    await send_all({"type": "executing", "data": {"node": None, "prompt_id": prompt_id}})


async def prompt(request):
    body = await request.json()
    prompt_id = body["prompt_id"]
    with open(sys.argv[2], "a") as f:
        f.write(prompt_id + "\n")
    if prompt_id in running or prompt_id in history:
        return web.json_response({"error": {"type": "prompt_id_known", "message": "known",
                                            "details": "", "extra_info": {}},
                                  "node_errors": {}}, status=400)
    item = [0, prompt_id, body["prompt"], body.get("extra_data", {}), ["1"]]
    running[prompt_id] = item
    asyncio.get_running_loop().create_task(run(prompt_id, item))
    request.transport.abort()  # the answer is lost
    return web.Response()


async def queue(_request):
    return web.json_response({"queue_running": list(running.values()), "queue_pending": []})


async def history_of(request):
    prompt_id = request.match_info["prompt_id"]
    return web.json_response({prompt_id: history[prompt_id]} if prompt_id in history else {})


async def main():
    app = web.Application()
    app.router.add_get("/orch/fleet/host", report)
    app.router.add_get("/ws", events)
    app.router.add_post("/prompt", prompt)
    app.router.add_get("/queue", queue)
    app.router.add_get("/history/{prompt_id}", history_of)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    await asyncio.Event().wait()


asyncio.run(main())
