"""A fleet host that attacks its gateway (test_gateway_hosts.cpp): it reports itself as a host
should, and then sends what a broken or hostile machine can. Its WebSocket sends an event nested
100,000 deep (a recursive copy or free of it overflows a stack), an event whose type is a number,
and, for each prompt it is given, the events of a prompt that ends and then a history entry chosen
by the prompt's TestSleep `ms` (test_gateway_files.cpp): 1, an entry that is no object; 2, outputs
naming a file `../../escaped-<prompt id>` (its /view gives bytes for any name); 3, a file whose
/view streams 4 MiB without a Content-Length; 4, five files. The gateway must go on answering,
write nothing outside its directories, and end the prompt with an error naming the host.
Its live views (test_gateway_live.cpp) are as hostile: a status past the gateway's 16 MiB cap, a
diverge document nested 100,000 deep, a timeline that is no JSON, and a /metrics text of good
samples among lines out of the format (a label of its own named host, a family of another type
than the real hosts', a 1 MiB line, control characters, the gateway's own family).
What the gateway proxies or gathers from it is as hostile: an /extensions list naming a path
outside /extensions/, a /system_stats of 10,000 devices (one with a name of 100 KiB, one with no
name), and a /free answered with JSON nested 100,000 deep.

Usage: hostile_host.py PORT_FILE (the port it listens on is written there once it listens).
"""
import asyncio
import json
import os
import sys

from aiohttp import web

DEPTH = 100_000
REPORT = {
    "name": "hostile",
    "fingerprint": "sha256:" + "0" * 64,
    "fingerprint_parts": {"comfy-orch": "hostile"},
    "node_classes": ["TestSleep"],
    "resident_models": [],
    "free_device_bytes": 1 << 30,
    "running": False,
    "queued": 0,
}
streams = []
kinds = {}  # prompt id: its TestSleep's ms


async def report(_request):
    return web.json_response(REPORT)


async def events(request):
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    streams.append(ws)
    await ws.send_str(json.dumps({"type": "status", "data": {"status": {}}}))
    await ws.send_str('{"type": "status", "data": ' + "[" * DEPTH + "]" * DEPTH + "}")
    await ws.send_str(json.dumps({"type": 1, "data": {"prompt_id": "none"}}))
    async for _ in ws:
        pass
    return ws


async def prompt(request):
    body = await request.json()
    prompt_id = body["prompt_id"]
    kinds[prompt_id] = body["prompt"]["1"]["inputs"]["ms"]

    async def run():
        await asyncio.sleep(0.1)
        for ws in streams:
            await ws.send_str(json.dumps({"type": "execution_start",
                                          "data": {"prompt_id": prompt_id}}))
            await ws.send_str('{"type": "progress", "data": {"prompt_id": "%s", "value": %s}}'
                              % (prompt_id, "[" * DEPTH + "]" * DEPTH))
            await ws.send_str(json.dumps({"type": "executing",
                                          "data": {"node": None, "prompt_id": prompt_id}}))

    asyncio.get_running_loop().create_task(run())
    return web.json_response({"prompt_id": prompt_id, "number": 0, "node_errors": {}})


def image(filename):
    return {"filename": filename, "subfolder": "", "type": "output"}


async def history(request):
    prompt_id = request.match_info["prompt_id"]
    kind = kinds.get(prompt_id, 1)
    if kind == 1:
        return web.json_response({prompt_id: 1})
    if kind == 2:
        images = [image("../../escaped-" + prompt_id)]
    elif kind == 3:
        images = [image("huge.png")]
    else:
        images = [image("many-%d.png" % i) for i in range(5)]
    return web.json_response({prompt_id: {
        "prompt": [0, prompt_id, {}, {}, ["1"]],
        "outputs": {"1": {"images": images}},
        "status": {"status_str": "success", "completed": True, "messages": []},
        "meta": {}}})


async def view(request):
    if request.query.get("filename") != "huge.png":
        return web.Response(body=b"escaped")
    response = web.StreamResponse()
    await response.prepare(request)  # chunked: no Content-Length to refuse it by
    for _ in range(64):
        await response.write(b"\0" * 65536)
    await response.write_eof()
    return response


async def huge_status(_request):
    return web.Response(text='{"processes": ["' + "x" * (20 << 20) + '"]}',
                        content_type="application/json")


async def nested_diverge(_request):
    return web.Response(text='{"divergent": true, "differences": ' + "[" * DEPTH + "]" * DEPTH
                        + "}", content_type="application/json")


async def broken_timeline(_request):
    return web.Response(text="{not json", content_type="application/json")


METRICS = "\n".join([
    "# HELP comfy_orch_calls_total Calls, as a host says",
    "# TYPE comfy_orch_calls_total counter",
    'comfy_orch_calls_total{process="hostile"} 7',
    'comfy_orch_calls_total{process="hostile",host="host-0"} 1',
    "# TYPE comfy_orch_budget_bytes counter",
    "comfy_orch_budget_bytes 1",
    'comfy_orch_calls_total{process="' + "y" * (1 << 20) + '"} 1',
    'comfy_orch_calls_total{process="\x1b]0;owned\x07"} 2',
    "comfy_orch_gateway_hosts_up 1000",
    "comfy_orch_calls_total{process=} 1",
    "}{ 1",
    "",
])


async def metrics(_request):
    return web.Response(text=METRICS, content_type="text/plain")
async def extensions(_request):
    return web.json_response(["/extensions/hostile/a.js", "/etc/passwd"])


async def system_stats(_request):
    devices = [{"name": "dev%d" % i, "type": "sim", "index": i, "vram_total": 1}
               for i in range(10_000)]
    devices[0] = {"name": "x" * 100_000, "type": "sim"}
    devices[1] = {"type": "sim"}
    return web.json_response({"system": {"comfyui_version": "hostile"}, "devices": devices})


async def free(_request):
    return web.Response(text="[" * DEPTH + "]" * DEPTH, content_type="application/json")


async def main():
    app = web.Application()
    app.router.add_get("/orch/fleet/host", report)
    app.router.add_get("/ws", events)
    app.router.add_post("/prompt", prompt)
    app.router.add_get("/history/{prompt_id}", history)
    app.router.add_get("/orch/status", huge_status)
    app.router.add_get("/orch/diverge", nested_diverge)
    app.router.add_get("/orch/timeline", broken_timeline)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/extensions", extensions)
    app.router.add_get("/system_stats", system_stats)
    app.router.add_post("/free", free)
    app.router.add_get("/view", view)
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
