"""The web side of a pack in its worker, in a ComfyUI-like process (docs/comfyui.md, "A pack's
web side"): ComfyUIHost's cases for the aiohttp routes a worker serves and ComfyUI's server or
`comfy-orch serve` forwards, and for a worker's messages and previews (run by
comfyui_from_python.py, whose process has loaded the demo packs)."""

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import comfy.utils


@contextlib.contextmanager
def serving(deployment, *options):
    """`comfy-orch serve` on `deployment`, on a free port: its URL, until the block ends."""
    server = subprocess.Popen([os.environ["ORCH_CLI"], "serve", deployment, "--port", "0",
                               "--no-control-socket", *options], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stdout:  # "comfy-orch serve: listening on http://ADDR:PORT"
            if "listening on " in line:
                yield line.split("listening on ", 1)[1].strip()
                break
        else:
            raise AssertionError("serve never listened: " + server.stderr.read())
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)



class WebSide:
    """Mixed into ComfyUIHost: self.log, self.run_prompt and the packs it loaded."""

    def _serve_routes(self, requests):
        """Runs `requests(client)` against ComfyUI's route table served on a loopback port, as
        main.py serves it once packs have loaded."""
        import asyncio
        import server
        from aiohttp import test_utils, web

        async def ask():
            app = web.Application()
            app.add_routes(server.PromptServer.instance.routes)
            async with test_utils.TestClient(test_utils.TestServer(app)) as client:
                return await requests(client)
        return asyncio.run(ask())

    def _record_send_sync(self):
        """What reaches ComfyUI's PromptServer.instance.send_sync from now on (the tree's own,
        called after recording: its queue has no running loop to drain it here)."""
        import server
        instance = server.PromptServer.instance
        original, sent = instance.send_sync, []

        def recording(event, data, sid=None):
            sent.append((event, data, sid))
            original(event, data, sid)
        instance.send_sync = recording
        self.addCleanup(delattr, instance, "send_sync")
        return sent

    def _wait_for(self, condition, what):
        deadline = time.monotonic() + 60
        while not condition():
            if time.monotonic() > deadline:
                self.fail("never happened: " + what)
            time.sleep(0.01)

    def test_a_workers_aiohttp_routes_are_served_with_real_requests_and_streamed_answers(self):
        import hashlib
        expected = hashlib.sha256(bytes(range(256)) * 4096 * 3).hexdigest()
        raw = os.urandom(5 << 20)

        async def requests(client):
            got = {}
            reply = await client.get("/orchdemo/web/file")
            whole = await reply.read()
            got["file"] = (reply.status, len(whole), hashlib.sha256(whole).hexdigest(),
                           reply.headers.get("Cache-Control"), reply.headers.get("ETag"))
            reply = await client.get("/orchdemo/web/file", headers={"Range": "bytes=100-199"})
            got["range"] = (reply.status, await reply.read(), reply.headers.get("Content-Range"))
            reply = await client.get("/orchdemo/web/file",
                                     headers={"If-None-Match": got["file"][4]})
            got["conditional"] = reply.status
            reply = await client.get("/orchdemo/web/item/a%20b/c/d.txt?x=1&y=two",
                                     headers={"X-Demo": "yes", "Cookie": "flavour=mint"})
            got["item"] = (reply.status, await reply.json())
            from aiohttp import FormData
            form = FormData()
            form.add_field("note", "hello")
            form.add_field("image", b"\x89PNG" + bytes(70000), filename="a.png",
                           content_type="image/png")
            reply = await client.post("/orchdemo/web/upload", data=form)
            got["upload"] = (reply.status, await reply.json())

            async def pieces():
                for i in range(0, len(raw), 1 << 20):
                    yield raw[i:i + (1 << 20)]
            reply = await client.put("/orchdemo/web/raw", data=pieces())
            got["raw"] = (reply.status, await reply.json())
            reply = await client.get("/orchdemo/web/stream")
            got["stream"] = (reply.status, await reply.text(), reply.headers.get("X-Stream"))
            reply = await client.get("/orchdemo/where?a=1")
            got["where"] = await reply.json()
            reply = await client.get("/view?filename=x.png")
            got["view"] = (reply.status, await reply.read())
            # A slow handler holds up no other request.
            import asyncio
            slow = asyncio.ensure_future(client.get("/orchdemo/web/slow"))
            reply = await client.get("/orchdemo/web/item/x/y")
            got["beside_slow"] = (reply.status, slow.done())
            await client.post("/orchdemo/web/release")
            reply = await slow
            got["slow"] = await reply.json()
            return got

        got = self._serve_routes(requests)
        self.assertEqual(got["file"][:4], (200, 3 << 20, expected, "no-cache"))
        self.assertEqual(got["range"], (206, (bytes(range(256)) * 4)[100:200],
                                        "bytes 100-199/%d" % (3 << 20)))
        self.assertEqual(got["conditional"], 304)
        status, item = got["item"]
        self.assertEqual(status, 200, item)
        self.assertNotEqual(item["pid"], os.getpid())  # the handler ran in the worker
        self.assertEqual((item["method"], item["path"], item["match_info"], item["query"],
                          item["cookie"], item["header"]),
                         ("GET", "/orchdemo/web/item/a b/c/d.txt", {"name": "a b", "rest": "c/d.txt"},
                          {"x": "1", "y": "two"}, "mint", "yes"))
        self.assertTrue(item["host"].startswith("127.0.0.1:"), item["host"])
        self.assertEqual(got["upload"], (201, {
            "fields": ["image", "note"], "name": "a.png", "size": 70004,
            "sha256": hashlib.sha256(b"\x89PNG" + bytes(70000)).hexdigest(), "note": "hello"}))
        self.assertEqual(got["raw"], (200, {"size": len(raw),
                                            "sha256": hashlib.sha256(raw).hexdigest()}))
        self.assertEqual(got["stream"], (200, "".join("piece %d\n" % i for i in range(5)), "yes"))
        self.assertEqual(got["beside_slow"], (200, False))
        self.assertEqual(got["slow"], {"released": True})
        # GET /orchdemo/where twice in the env (ROUTES, then aiohttp): the first answers, and
        # the worker's log names the clash.
        self.assertEqual(set(got["where"]), {"pid", "query"})
        # GET /view is ComfyUI's, registered first: it answers, and the log names both.
        self.assertEqual(got["view"][0], 404)
        self.assertNotIn(b"pack", got["view"][1])
        self.assertIn("[comfy-orch] route GET /view of env orchdemoa-nodes is not served: "
                      "PromptServer.__init__.<locals>.view_image already answers it (ComfyUI's "
                      "rule: the first registration wins)", self.log.lines)

    def test_a_dead_workers_route_answers_502_naming_its_env_and_serves_again_after_restart(self):
        async def die(client):
            reply = await client.post("/orchdemo/web/die")
            return reply.status, await reply.json()
        status, body = self._serve_routes(die)
        self.assertEqual(status, 502, body)
        self.assertIn("the worker of env orchdemoa-nodes (pack ComfyUI-OrchDemoA)", body["error"])
        from comfy_orch.comfyui import _runtime

        def served_again():
            async def item(client):
                return (await client.get("/orchdemo/web/item/p/q")).status
            return self._serve_routes(item) == 200
        # Until the host has seen the loss and started a new worker, its socket refuses (502).
        self._wait_for(served_again, "served again")
        # Its routes are served from the pack's import on, before its ready: the later cases
        # call its nodes.
        self._wait_for(lambda: all(w["state"] == "ready"
                                   for w in _runtime._host.nodes()["workers"]), "ready again")

    def test_a_workers_messages_reach_comfyuis_server_in_order_and_binary_stays_binary(self):
        sent = self._record_send_sync()

        async def say(client):
            return (await client.post("/orchdemo/web/say",
                                      json={"text": "hi", "sid": "client-3"})).status
        self.assertEqual(self._serve_routes(say), 200)
        self._wait_for(lambda: len(sent) >= 4, "four messages")
        self.assertEqual(sent[:4], [
            ("orchdemo.said", {"text": "hi"}, "client-3"), ("orchdemo.async", {"n": 1}, None),
            (5, b"\x00\x01raw", "client-3"),
            (3, b"\x00\x00\x00\x0242working on it", "client-3")])

    def test_a_worker_nodes_messages_and_preview_reach_comfyui_for_the_prompts_client(self):
        import server
        instance = server.PromptServer.instance
        sent = self._record_send_sync()
        seen = []
        comfy.utils.set_progress_bar_global_hook(
            lambda value, total, preview, node_id=None: seen.append((value, total, preview,
                                                                     node_id)))
        instance.client_id = "client-7"  # as ComfyUI sets it when a prompt starts
        try:
            out = self.run_prompt({"t": {"class_type": "DemoTalker", "inputs": {"text": "yo"}}})
        finally:
            comfy.utils.set_progress_bar_global_hook(None)
            instance.client_id = None
        self.assertEqual(out["t"][0], [2])
        # Sent before the call's answer, on the same channel: here when the call returns.
        self.assertEqual(sent, [
            ("orchdemo.talk", {"text": "yo", "client": "client-7"}, "client-7"),
            (3, b"\x00\x00\x00\x01ttalking: yo", "client-7")])
        previews = [s for s in seen if s[2] is not None]
        self.assertEqual(len(previews), 1, seen)
        value, total, (image_type, image, max_size), node = previews[0]
        self.assertEqual((value, total, image_type, image.size, max_size, node),
                         (1, 2, "JPEG", (16, 8), 16, "t"))
        self.assertEqual(image.getpixel((3, 3)), (200, 10, 10))
        self.assertIn((2, 2, None, "t"), seen)

    def test_serve_forwards_a_workers_aiohttp_routes_and_its_messages_reach_ws_clients(self):
        import hashlib
        import websocket  # Debian's python3-websocket
        with serving(os.environ["COMFY_ORCH_DEPLOYMENT"], "--max-upload", str(1 << 20),
                      "--max-uploads-in-flight", str(64 << 20)) as url:
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

            def ask(path, data=None, headers=None, method=None):
                request = urllib.request.Request(url + path, data=data, headers=headers or {},
                                                 method=method)
                try:
                    with direct.open(request, timeout=60) as reply:
                        return reply.status, dict(reply.headers), reply.read()
                except urllib.error.HTTPError as e:
                    return e.code, dict(e.headers), e.read()
            status, headers, whole = ask("/orchdemo/web/file")
            self.assertEqual((status, len(whole), headers.get("Cache-Control")),
                             (200, 3 << 20, "no-cache"))
            self.assertEqual(hashlib.sha256(whole).digest(),
                             hashlib.sha256(bytes(range(256)) * 4096 * 3).digest())
            status, headers, part = ask("/api/orchdemo/web/file", headers={"Range": "bytes=5-9"})
            self.assertEqual((status, part), (206, bytes(range(5, 10))))
            status, _, body = ask("/orchdemo/web/item/a%20b/c/d.txt?x=1",
                                  headers={"Cookie": "flavour=mint", "X-Demo": "yes"})
            item = json.loads(body)
            self.assertEqual((status, item["match_info"], item["query"], item["cookie"],
                              item["header"]), (200, {"name": "a b", "rest": "c/d.txt"},
                                                {"x": "1"}, "mint", "yes"))
            raw = os.urandom(900 << 10)
            status, _, body = ask("/orchdemo/web/raw", data=raw, method="PUT")
            self.assertEqual((status, json.loads(body)),
                             (200, {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}))
            status, _, body = ask("/orchdemo/web/stream")
            self.assertEqual((status, body), (200, b"".join(b"piece %d\n" % i for i in range(5))))
            # A slow handler holds up neither serve's API thread nor another route.
            import threading
            slow = {}
            waiting = threading.Thread(target=lambda: slow.update(
                answer=ask("/orchdemo/web/slow")))
            waiting.start()
            self.assertEqual(ask("/system_stats")[0], 200)
            self.assertEqual(ask("/orchdemo/web/item/p/q")[0], 200)
            self.assertNotIn("answer", slow)
            self.assertEqual(ask("/orchdemo/web/release", data=b"")[0], 200)
            waiting.join(60)
            self.assertEqual(json.loads(slow["answer"][2]), {"released": True})
            status, _, body = ask("/orchdemo/web/none")
            self.assertEqual(status, 404)  # the worker's aiohttp matches the rest
            # serve's own /view answers before any pack's route at its path.
            status, _, body = ask("/view?filename=x.png")
            self.assertEqual(status, 404)
            self.assertNotIn(b"pack", body)
            # A forwarded request passes serve's origin check and its upload cap first.
            status, _, body = ask("/orchdemo/web/say", data=b"{}", headers={
                "Origin": "http://elsewhere.example", "Content-Type": "application/json"})
            self.assertEqual(status, 403, body)
            status, _, body = ask("/orchdemo/web/raw", data=bytes(2 << 20), method="PUT")
            self.assertEqual(status, 413, body)
            ws = websocket.create_connection(url.replace("http", "ws") + "/ws?clientId=c9",
                                             timeout=60)
            try:
                frames = []
                status, _, _ = ask("/orchdemo/web/say", data=json.dumps(
                    {"text": "hi", "sid": "c9"}).encode(), headers={"Content-Type":
                                                                    "application/json"})
                self.assertEqual(status, 200)
                while len([f for f in frames if not (isinstance(f, str) and
                                                     '"status"' in f)]) < 4:
                    frames.append(ws.recv())
            finally:
                ws.close()
            mine = [f for f in frames if not (isinstance(f, str) and '"status"' in f)]
            self.assertEqual(json.loads(mine[0]), {"type": "orchdemo.said", "data": {"text": "hi"}})
            self.assertEqual(json.loads(mine[1]), {"type": "orchdemo.async", "data": {"n": 1}})
            self.assertEqual(mine[2:], [b"\x00\x00\x00\x05\x00\x01raw",
                                        b"\x00\x00\x00\x03\x00\x00\x00\x0242working on it"])
            self._prompts_client_sees_its_nodes_web_side(url, ask, websocket)
            # A worker that dies under its handler: 502 naming its env, then served again once
            # it has restarted.
            status, _, body = ask("/orchdemo/web/die", data=b"")
            self.assertEqual(status, 502, body)
            self.assertIn(b"the worker of env orchdemoa-nodes (pack ComfyUI-OrchDemoA)", body)
            self._wait_for(lambda: ask("/orchdemo/web/item/p/q")[0] == 200, "served again")

    def _prompts_client_sees_its_nodes_web_side(self, url, ask, websocket):
        """Under serve: a node's message for its prompt's client (client_id in the worker), its
        progress text and its preview as PREVIEW_IMAGE_WITH_METADATA (the client asked for it),
        to that client and not to another."""
        mine = websocket.create_connection(url.replace("http", "ws") + "/ws?clientId=c10",
                                           timeout=60)
        other = websocket.create_connection(url.replace("http", "ws") + "/ws?clientId=c11",
                                            timeout=60)
        try:
            mine.send(json.dumps({"type": "feature_flags",
                                  "data": {"supports_preview_metadata": True}}))
            status, _, body = ask("/prompt", data=json.dumps({
                "client_id": "c10",
                "prompt": {"t": {"class_type": "DemoTalker", "inputs": {"text": "yo"}}}}).encode(),
                headers={"Content-Type": "application/json"})
            self.assertEqual(status, 200, body)
            prompt_id = json.loads(body)["prompt_id"]
            frames = []
            while not any(isinstance(f, str) and '"execution_success"' in f for f in frames):
                frames.append(mine.recv())
            # The other client's messages up to the queue's status once the prompt ended (its
            # status went from 1 to 0 remaining): anything misrouted came before it.
            others, seen_queued = [], False
            while True:
                others.append(other.recv())
                last = others[-1]
                if isinstance(last, str) and json.loads(last)["type"] == "status":
                    remaining = json.loads(last)["data"]["status"]["exec_info"]["queue_remaining"]
                    seen_queued = seen_queued or remaining > 0
                    if seen_queued and remaining == 0:
                        break
        finally:
            mine.close()
            other.close()
        texts = [json.loads(f) for f in frames if isinstance(f, str)]
        self.assertIn({"type": "orchdemo.talk", "data": {"text": "yo", "client": "c10"}}, texts)
        binary = [f for f in frames if isinstance(f, bytes)]
        self.assertIn(b"\x00\x00\x00\x03\x00\x00\x00\x01ttalking: yo", binary)
        previews = [f for f in binary if f[:4] == b"\x00\x00\x00\x04"]
        self.assertEqual(len(previews), 1, binary)
        length = int.from_bytes(previews[0][4:8], "big")
        metadata = json.loads(previews[0][8:8 + length])
        self.assertEqual(metadata, {"node_id": "t", "prompt_id": prompt_id, "display_node_id": "t",
                                    "parent_node_id": None, "real_node_id": "t",
                                    "image_type": "image/jpeg"})
        self.assertEqual(previews[0][8 + length:8 + length + 2], b"\xff\xd8")  # a JPEG
        self.assertTrue(any(t["type"] == "progress" and t["data"]["value"] == 1 for t in texts))
        # The other client hears none of it (ComfyUI routes by the prompt's client_id).
        self.assertFalse([f for f in others if isinstance(f, bytes) or "orchdemo" in f], others)
