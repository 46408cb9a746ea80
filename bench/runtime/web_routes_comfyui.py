"""bench_web_routes' ComfyUI process (docs/performance.md, "A pack's web side"), started by
bench_web_routes.cpp as the host tests start theirs (tests/integration/host/comfyui_from_python.py):

    python3 web_routes_comfyui.py <harness dir> <custom_nodes dir>

with COMFY_ORCH_DEPLOYMENT naming a deployment over that directory, comfy_orch's python/ and the
fixture ComfyUI tree on PYTHONPATH, and ORCH_HOST_LIBRARY and ORCH_WORKER_EXECUTABLE set. The
harness directory holds comfyui_under_test.py and loader_harness.py.

It loads the packs as ComfyUI does, so each worker route is on ComfyUI's table
(`PromptServer.instance.routes`) with comfy_orch's forwarding handler (comfyui/_web_proxy.py),
and serves that table with aiohttp on a loopback port, on a loop and thread of its own, as
main.py serves it (an AppRunner without an access log, ComfyUI's body cap). Beside the pack's
routes it serves two of this process's own, the floors: the same file as a FileResponse, and the
same JSON answer.

It prints "listening on http://127.0.0.1:PORT" once it serves, then answers its stdin, a command
a line:

    calls N    N Host.call of the pack's empty node, one after the other, from this thread (as
               ComfyUI's prompt thread calls a node): "calls" and each call's microseconds
    quit       stops the host and exits
"""

import asyncio
import os
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import comfyui_under_test  # noqa: E402

comfyui_under_test.prepare()
import loader_harness  # noqa: E402

CUSTOM_NODES = sys.argv[2]
PACK_NODES = os.path.join(CUSTOM_NODES, "ComfyUI-OrchBenchWeb", "nodes")
FILE = os.path.join(PACK_NODES, "orchbench-file.bin")
# The pack's JSON answer (nodes/__init__.py), answered here by this process itself.
ANSWER = {"ok": True, "pack": "ComfyUI-OrchBenchWeb", "n": 1}
BODY_CAP = 100 << 20  # ComfyUI's --max-upload-size default, its app's client_max_size


def _app():
    import server
    from aiohttp import web

    async def direct_file(request):
        return web.FileResponse(FILE)

    async def direct_json(request):
        return web.json_response(ANSWER)

    app = web.Application(client_max_size=BODY_CAP)
    app.add_routes(server.PromptServer.instance.routes)
    app.router.add_get("/orchbench-direct/file", direct_file)
    app.router.add_get("/orchbench-direct/json", direct_json)
    return app


def _serve(app):
    """Serves `app` on 127.0.0.1 on a new loop in a daemon thread; returns the port."""
    from aiohttp import web
    loop = asyncio.new_event_loop()
    started = threading.Event()
    port = []

    async def start():
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.append(runner.addresses[0][1])

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    threading.Thread(target=run, name="comfyui-server", daemon=True).start()
    started.wait()
    return port[0]


def main():
    classes, _display, failed = loader_harness.load_custom_nodes(CUSTOM_NODES)
    if failed or "BenchWebEmpty" not in classes:
        print("failed %r" % (failed,), flush=True)
        return 2
    from comfy_orch.comfyui import _runtime
    host = _runtime._host
    print("listening on http://127.0.0.1:%d" % _serve(_app()), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["calls"]:
            samples = []
            for _ in range(int(words[1])):
                t = time.perf_counter()
                host.call("BenchWebEmpty", {})
                samples.append((time.perf_counter() - t) * 1e6)
            print("calls " + " ".join("%.1f" % s for s in samples), flush=True)
        elif words[:1] == ["quit"]:
            break
    _runtime.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
