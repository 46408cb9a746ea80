"""comfy_orch.comfyui in a ComfyUI-like process (run by test_comfyui_host.cpp):

    python3 comfyui_from_python.py <custom_nodes dir>

with COMFY_ORCH_DEPLOYMENT naming a deployment over that directory, comfy_orch's python/ and the
fixture ComfyUI tree on sys.path, and ORCH_HOST_LIBRARY set. The packs are loaded the way ComfyUI
loads them (loader_harness.py) and written for comfy-env: `from comfy_env import register_nodes`.
"""

import contextlib
import importlib.util
import io as text_io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import torch  # ComfyUI's process has torch: worker tensors arrive as torch tensors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "comfyui"))
import comfyui_under_test  # noqa: E402
comfyui_under_test.prepare()
import comfy.model_management  # noqa: E402
import comfy.utils  # noqa: E402
import folder_paths  # noqa: E402
import loader_harness  # noqa: E402
from comfyui_web_side import WebSide, serving  # noqa: E402

CUSTOM_NODES = sys.argv.pop(1)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _as_json(value):
    """What a client reads of `value`: /object_info is JSON (tuples are lists there)."""
    return json.loads(json.dumps(value))


def _served_object_info(deployment):
    """GET /object_info of `comfy-orch serve` on `deployment`."""
    with serving(deployment) as url:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(url + "/object_info", timeout=60) as reply:
            return json.loads(reply.read())


def _as_output_node(cls):
    """`cls` as an output node, so the executor runs it alone."""
    return type(cls.__name__, (cls,), {"OUTPUT_NODE": True})


class ComfyUIHost(WebSide, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.log = _Lines()
        logging.getLogger("comfy_orch").addHandler(cls.log)
        logging.getLogger("comfy_orch").setLevel(logging.INFO)
        cls.input = tempfile.mkdtemp(prefix="orch-comfyui-input-")
        folder_paths.set_input_directory(cls.input)  # as --input-directory does
        cls.prestartup_output = text_io.StringIO()
        with contextlib.redirect_stderr(cls.prestartup_output):
            cls.prestartup_failed = loader_harness.run_prestartup_scripts(CUSTOM_NODES)
        cls.classes, cls.display, cls.failed = loader_harness.load_custom_nodes(CUSTOM_NODES)

    @classmethod
    def tearDownClass(cls):
        from comfy_orch.comfyui import _runtime
        _runtime.stop()
        import shutil
        shutil.rmtree(cls.input, ignore_errors=True)

    def run_prompt(self, prompt, uis=None):
        return loader_harness.execute(prompt, self.classes, uis=uis)

    def test_prestartup_scripts_call_setup_env_and_copy_files_unguarded(self):
        self.assertEqual(self.prestartup_failed, {})
        report = self.prestartup_output.getvalue()
        self.assertIn("[comfy-orch] ComfyUI-OrchDemoA: 1 isolation env(s):", report)
        self.assertIn("[ok]", report)
        self.assertIn("[comfy-orch] prestartup complete", report)
        # Into ComfyUI's input directory through folder_paths, keeping the relative paths.
        with open(os.path.join(self.input, "orchdemo", "sub", "readme.txt")) as f:
            self.assertEqual(f.read(), "demo asset\n")
        from comfy_env import copy_files
        self.assertEqual(copy_files("no-such-dir", "input/x"), 0)

    def test_a_worker_nodes_ui_reaches_comfyui_as_the_pack_returned_it(self):
        uis = {}
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 8, "height": 4}},
            "2": {"class_type": "DemoViewer", "inputs": {"image": ["1", 0]}},
        }, uis)
        self.assertEqual(out["2"], [[8]])
        # The pack's worker imports ComfyUI's server module at its top (comfy.model_management
        # with it): it runs because ComfyUI's --cpu reached the worker.
        self.assertEqual(uis["2"], [{"text": ["8x4"], "cpu": [True]}])

    def test_a_packs_routes_are_served_by_comfyui_and_answered_in_its_worker(self):
        # ComfyUI's server adds PromptServer.instance.routes to its app once packs have loaded
        # (main.py); here the same table is served on a loopback port and asked over HTTP.
        import asyncio
        import server
        from aiohttp import test_utils, web

        async def ask():
            app = web.Application()
            app.add_routes(server.PromptServer.instance.routes)
            async with test_utils.TestClient(test_utils.TestServer(app)) as client:
                async def answer(method, path, **kwargs):
                    reply = await client.request(method, path, **kwargs)
                    return reply.status, await reply.json(content_type=None)
                return {
                    "echo": await answer("POST", "/orchdemo/echo", json={"x": [1, 2]}),
                    "where": await answer("GET", "/orchdemo/where?a=1"),
                    "refuse": await answer("POST", "/orchdemo/refuse", json={"why": "no"}),
                    "broken": await answer("POST", "/orchdemo/broken", json={}),
                    "invalid": await answer("POST", "/orchdemo/echo", data=b"{not json",
                                            headers={"Content-Type": "application/json"}),
                    "missing": (await client.post("/orchdemo/missing", json={})).status,
                }
        answers = asyncio.run(ask())
        status, echo = answers["echo"]
        self.assertEqual(status, 200, echo)
        self.assertEqual(echo["echo"], {"x": [1, 2]})
        self.assertNotEqual(echo["pid"], os.getpid())  # the handler ran in the worker
        self.assertEqual(echo["greeting"], "hello from demo A")  # with the env's variables
        self.assertEqual(answers["where"], (200, {"pid": echo["pid"], "query": {"a": "1"}}))
        self.assertEqual(answers["refuse"], (422, {"error": "refused: no"}))
        status, broken = answers["broken"]
        self.assertEqual(status, 502)
        self.assertEqual(broken["type"], "ValueError")
        self.assertIn("the handler failed on purpose", broken["error"])
        self.assertEqual(answers["invalid"], (400, {"error": "Invalid JSON"}))
        # A handler the module lacks is never registered (the worker's log says why).
        self.assertEqual(answers["missing"], 404)
        served = [line for line in self.log.lines  # those of the ROUTES list
                  if line.startswith("[comfy-orch] route ") and " -> " in line and
                  ".routes." in line]
        self.assertEqual(len(served), 4, self.log.lines)
        # A route is no node: no class of ComfyUI's, none that a prompt could name.
        self.assertFalse([n for n in self.classes if n.startswith("orch.route:")])

    def test_comfyuis_arguments_reach_the_workers(self):
        import json as json_module
        mirrored = json_module.loads(os.environ["COMFY_ORCH_COMFYUI_ARGS"])
        if not torch.cuda.is_available():  # prepare() parsed --cpu then, as main.py would
            self.assertIs(mirrored["cpu"], True)
            self.assertEqual(os.environ.get("COMFY_CPU"), "1")
        self.assertIn("highvram", mirrored)

    def test_a_pack_that_fails_in_its_worker_is_reported_and_never_imported_in_process(self):
        # A tree of its own: one pack whose env exists (its interpreter is this one) and whose
        # import fails in the worker, loaded by a second ComfyUI-like process.
        with tempfile.TemporaryDirectory(prefix="orch-broken-") as tree:
            nodes = os.path.join(tree, "custom_nodes", "ComfyUI-OrchBroken", "nodes")
            os.makedirs(nodes)
            with open(os.path.join(nodes, "..", "__init__.py"), "w") as f:
                f.write("from comfy_env import register_nodes\n"
                        "NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()\n")
            with open(os.path.join(nodes, "comfy-env.toml"), "w") as f:
                f.write("[pypi-dependencies]\nplyfile = \"*\"\n")
            with open(os.path.join(nodes, "__init__.py"), "w") as f:
                f.write("import os\nos.environ['ORCH_BROKEN_IMPORTED'] = str(os.getpid())\n"
                        "from .loader import NODE_CLASS_MAPPINGS\n")
            with open(os.path.join(nodes, "loader.py"), "w") as f:
                f.write("def load():\n    import plyfile_not_installed\n\nload()\n")
            with open(os.environ["COMFY_ORCH_DEPLOYMENT"]) as f:
                text = f.read()
            deployment = os.path.join(tree, "deployment.toml")
            with open(deployment, "w") as f:
                f.write(text.replace(CUSTOM_NODES, os.path.join(tree, "custom_nodes"))
                        .replace('"orchdemoa-nodes"', '"orchbroken-nodes"'))
            child = subprocess.run(
                [sys.executable, "-c", _BROKEN_CHILD, os.path.dirname(loader_harness.__file__),
                 os.path.join(tree, "custom_nodes")], capture_output=True, text=True, timeout=120,
                env=dict(os.environ, COMFY_ORCH_DEPLOYMENT=deployment))
        self.assertEqual(child.returncode, 0, child.stdout + child.stderr)
        self.assertIn("NOT IMPORTED HERE", child.stdout, child.stderr)
        self.assertIn("IMPORT FAILED in its worker (env orchbroken-nodes)", child.stderr)
        self.assertIn("ModuleNotFoundError: No module named 'plyfile_not_installed' (at "
                      "nodes/loader.py:2 in load, nodes/loader.py:4 in <module>, "
                      "nodes/__init__.py:3 in <module>)", child.stderr)
        self.assertNotIn("importing it in-process", child.stderr)

    def test_every_pack_loads_with_isolated_envs_as_proxies_and_the_rest_in_process(self):
        self.assertEqual(self.failed, {})
        for name in ("DemoGradient", "DemoLoadModel", "DemoApplyModel", "DemoSleep",
                     "DemoInvert", "DemoBatchSizes", "DemoV3Gain"):
            self.assertTrue(hasattr(self.classes[name], "COMFY_ORCH_ENV"), name)
        # No manifest, and a manifest whose env is not built: ComfyUI's own process.
        for name in ("DemoMean", "DemoWhere"):
            self.assertFalse(hasattr(self.classes[name], "COMFY_ORCH_ENV"), name)
        self.assertEqual(self.display["DemoGradient"], "Demo Gradient")
        fallback = [line for line in self.log.lines if "ComfyUI-OrchDemoC" in line]
        self.assertEqual(len(fallback), 1, self.log.lines)
        self.assertIn("not isolated", fallback[0])
        self.assertIn("comfy-orch install", fallback[0])

    def test_a_pack_survives_one_node_directorys_failure(self):
        # B's blender/ env is not built, and its code cannot import in ComfyUI's process: that
        # directory's nodes are missing, named with why and the fix; B's isolated filters/ and
        # its in-process plain/ load, and their worker serves them.
        self.assertNotIn("ComfyUI-OrchDemoB", self.failed)
        self.assertNotIn("DemoBoolean", self.classes)
        self.assertTrue(hasattr(self.classes["DemoInvert"], "COMFY_ORCH_ENV"))
        self.assertIn("DemoMean", self.classes)
        failed = [line for line in self.log.lines if "IMPORT FAILED in-process" in line]
        self.assertEqual(len(failed), 1, self.log.lines)
        self.assertIn("ComfyUI-OrchDemoB/nodes/blender", failed[0])
        self.assertIn("(its env orchdemob-blender is not built)", failed[0])
        self.assertIn("ModuleNotFoundError: No module named 'bpy_not_installed' (at "
                      "nodes/blender/__init__.py:1 in <module>", failed[0])
        self.assertIn("`comfy-orch install ", failed[0])
        self.assertIn(" orchdemob-blender`", failed[0])

    def test_a_proxy_declares_what_the_pack_declares(self):
        proxy = self.classes["DemoGradient"]
        types = proxy.INPUT_TYPES()
        self.assertEqual(types["required"]["width"], ("INT", {"default": 8, "max": 4096, "min": 1}))
        self.assertEqual(proxy.RETURN_TYPES, ("IMAGE",))
        self.assertEqual(proxy.FUNCTION, "make")
        self.assertEqual(proxy.CATEGORY, "demo")
        self.assertEqual(self.classes["DemoApplyModel"].RETURN_NAMES, ("image", "where"))
        self.assertTrue(self.classes["DemoBatchSizes"].INPUT_IS_LIST)
        self.assertEqual(self.classes["DemoBatchSizes"].OUTPUT_IS_LIST, (True,))

    def test_object_info_is_comfyuis_node_info_for_every_class_proxied_or_served(self):
        # What ComfyUI's /object_info shows for each of pack A's classes imported in-process,
        # as it would load them without isolation (nodes.py sets RELATIVE_PYTHON_MODULE).
        nodes = os.path.join(CUSTOM_NODES, "ComfyUI-OrchDemoA", "nodes")
        spec = importlib.util.spec_from_file_location(
            "orch_in_process_demo_a", os.path.join(nodes, "__init__.py"),
            submodule_search_locations=[nodes])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        display = module.NODE_DISPLAY_NAME_MAPPINGS
        truth = {}
        for name, cls in module.NODE_CLASS_MAPPINGS.items():
            cls.RELATIVE_PYTHON_MODULE = "custom_nodes.ComfyUI-OrchDemoA"
            truth[name] = _as_json(loader_harness.node_info(name, cls, display))
        self.assertIn("DemoDeclaredV3", truth)
        # The proxies ComfyUI loaded through register_nodes, read by ComfyUI's own node_info.
        for name, expected in truth.items():
            with self.subTest(proxy=name):
                proxied = _as_json(loader_harness.node_info(name, self.classes[name],
                                                            self.display))
                self.assertEqual(proxied, expected)
                # Byte for byte, as ComfyUI's JSON sends it: keys in the pack's order too.
                self.assertEqual(json.dumps(proxied), json.dumps(expected))
        # `comfy-orch serve` over the same packs: its /object_info, but for orch_env.
        served = _served_object_info(os.environ["COMFY_ORCH_DEPLOYMENT"])
        for name, expected in truth.items():
            with self.subTest(served=name):
                entry = dict(served[name])
                self.assertEqual(entry.pop("orch_env"), "orchdemoa-nodes")
                self.assertEqual(entry, expected)
        self.assertFalse([n for n in served if n.startswith("orch.route:")])  # routes are no nodes
        # What the issue found wrong, spelled out.
        everything = served["DemoDeclaresEverything"]
        self.assertEqual(everything["input"]["required"]["seed"][1]["max"], 0xffffffffffffffff)
        self.assertEqual(everything["input"]["required"]["count"], ["INT", {"forceInput": True}])
        self.assertEqual(everything["input"]["hidden"]["unique_id"], "UNIQUE_ID")
        self.assertEqual(everything["input_order"]["hidden"],
                         ["unique_id", "prompt", "extra_pnginfo", "dynprompt"])
        self.assertEqual(everything["output_name"], ["seed_out", "texts", "image_out"])
        self.assertEqual(everything["python_module"], "custom_nodes.ComfyUI-OrchDemoA")
        self.assertTrue(everything["description"])

    def test_a_prompt_crosses_two_isolated_envs_and_comfyuis_process(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 8, "height": 4}},
            "2": {"class_type": "DemoInvert", "inputs": {"image": ["1", 0]}},
            "3": {"class_type": "DemoMean", "inputs": {"image": ["2", 0]}},
        })
        image = out["2"][0][0]
        self.assertIsInstance(image, torch.Tensor)
        self.assertEqual(tuple(image.shape), (1, 4, 8, 3))
        self.assertAlmostEqual(out["3"][0][0], 0.5, places=5)
        self.assertEqual(out["3"][1][0], os.getpid())      # DemoMean ran here
        self.assertNotEqual(out["2"][1][0], os.getpid())   # DemoInvert in its worker

    def test_a_tuple_inside_an_output_stays_a_tuple_in_comfyui_and_in_another_env(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 8, "height": 4}},
            "2": {"class_type": "DemoSize", "inputs": {"image": ["1", 0]}},
            "3": {"class_type": "DemoDescribeSize", "inputs": {"size": ["2", 0]}},
        })
        self.assertEqual(out["2"][0][0], (8, 4, ("w", "h")))  # here, in ComfyUI's process
        self.assertEqual(out["3"][0][0], "tuple of (8, 4), tuple")  # in env B's worker

    def test_a_worker_nodes_subgraph_expansion_is_run_by_comfyui(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoInvertedGradient", "inputs": {"width": 4}},
            "2": {"class_type": "DemoMean", "inputs": {"image": ["1", 0]}},
        })
        image = out["1"][0][0]  # env B's inversion of env A's gradient, run in its place
        self.assertEqual(tuple(image.shape), (1, 2, 4, 3))
        self.assertAlmostEqual(float(image[0, 0, 0, 0]), 1.0)
        self.assertAlmostEqual(float(image[0, 0, -1, 0]), 0.0)

    def test_a_model_stays_in_its_worker_and_only_its_env_can_use_it(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 4, "height": 2}},
            "2": {"class_type": "DemoLoadModel", "inputs": {"gain": 3.0}},
            "3": {"class_type": "DemoApplyModel", "inputs": {"model": ["2", 0], "image": ["1", 0]}},
            "4": {"class_type": "DemoMean", "inputs": {"image": ["3", 0]}},
        })
        model = out["2"][0][0]
        self.assertEqual(model.type_name, "DEMO_MODEL")
        self.assertIn("hello from demo A", out["3"][1][0])  # the env's [env_vars]
        self.assertAlmostEqual(out["4"][0][0], 1.5, places=5)
        # Touched in ComfyUI's process (a core node would): a clear error, type and owner.
        with self.assertRaises(TypeError) as caught:
            model.gain
        self.assertIn("DEMO_MODEL", str(caught.exception))
        # Sent to another env's node: pickled across, and refused there, as B cannot import the
        # class (it is defined in A's node module), naming both envs, the type and the fix.
        from comfy_orch.host import NodeError
        with self.assertRaises(NodeError) as refused:
            self.run_prompt({
                "2": {"class_type": "DemoLoadModel", "inputs": {"gain": 3.0}},
                "3": {"class_type": "DemoMean", "inputs": {"image": ["5", 0]}},
                "5": {"class_type": "DemoInvert", "inputs": {"image": ["2", 0]}},
            })
        message = refused.exception.message
        self.assertIn("DemoModel made in env 'orchdemoa-nodes' cannot be used in env "
                      "'orchdemob-filters': this env cannot import its type", message)
        self.assertIn("register_serializer", message)

    def test_a_pack_object_crosses_to_another_env_that_can_import_its_type(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoMesh", "inputs": {}},
            "2": {"class_type": "DemoMeshInfo", "inputs": {"mesh": ["1", 0]}},
        })
        said = out["2"][0][0]
        self.assertTrue(said.startswith("SimpleNamespace of 3 vertices, made in pid "), said)
        made, read = [int(w) for w in said.replace(",", " ").split() if w.isdigit()][1:]
        self.assertNotEqual(made, read)  # two workers: A's object, rebuilt in B's
        crossed = [line for line in self.log.lines if "SimpleNamespace crosses" in line]
        self.assertEqual(len(crossed), 1, self.log.lines)  # said once, with its cost
        self.assertIn("types.SimpleNamespace crosses from env orchdemoa-nodes to env "
                      "orchdemob-filters pickled (", crossed[0])
        self.run_prompt({
            "1": {"class_type": "DemoMesh", "inputs": {}},
            "2": {"class_type": "DemoMeshInfo", "inputs": {"mesh": ["1", 0]}},
        })
        self.assertEqual(len([line for line in self.log.lines
                              if "SimpleNamespace crosses" in line]), 1)
        self.assertNotIn("(0 bytes", crossed[0])

    def test_a_class_that_is_v3_in_its_worker_is_a_v3_node_in_comfyui(self):
        from comfy_api.latest import io
        proxy = self.classes["DemoV3Gain"]
        self.assertTrue(issubclass(proxy, io.ComfyNode))
        self.assertFalse(issubclass(self.classes["DemoInvert"], io.ComfyNode))  # V1 stays V1
        schema = proxy.define_schema()
        self.assertEqual((schema.node_id, schema.display_name, schema.category),
                         ("DemoV3Gain", "Demo Gain (V3)", "demo/filters"))
        self.assertTrue(schema.is_output_node)
        by_id = {i.id: i for i in schema.inputs}
        self.assertEqual([i.id for i in schema.inputs], ["image", "gain", "mode", "tag"])
        self.assertEqual(by_id["image"].get_io_type(), "IMAGE")
        self.assertEqual(by_id["gain"].get_io_type(), "FLOAT")
        gain = by_id["gain"].as_dict()  # ComfyUI's V1 options of the input
        self.assertEqual((gain["default"], gain["min"], gain["max"]), (2.0, 0.0, 8.0))
        self.assertEqual(by_id["mode"].as_dict()["options"], ["mul", "add"])
        self.assertEqual(by_id["tag"].get_io_type(), "DEMO_TAG")
        self.assertTrue(by_id["tag"].optional)
        self.assertEqual([o.get_io_type() for o in schema.outputs], ["IMAGE", "STRING"])
        self.assertEqual([o.display_name for o in schema.outputs], ["image", "who"])
        # /object_info in the pack's order, as in-process (the host's JSON sorts keys).
        info = proxy.GET_NODE_INFO_V1()
        self.assertEqual(list(info["input"]), ["required", "optional", "hidden"])
        self.assertEqual(list(info)[:3], ["input", "input_order", "output"])  # NodeInfoV1's
        self.assertEqual(list(info["input"]["required"]), ["image", "gain", "mode"])
        # Its own validate_inputs and fingerprint_inputs run in the worker. ComfyUI reads the
        # method's signature to know what to pass and what it still range-checks itself.
        import inspect
        spec = inspect.getfullargspec(proxy.validate_inputs)
        self.assertEqual((spec.args, spec.varkw), (["cls", "gain", "mode"], None))
        self.assertIs(proxy.validate_inputs(gain=2.0, mode="mul"), True)
        self.assertEqual(proxy.validate_inputs(gain=3.0, mode="mul"), "a gain of 3 is not allowed")
        self.assertEqual(proxy.fingerprint_inputs(gain=2.0, mode="add"), "add:2.0")
        # Run by ComfyUI's V3 executor: hidden values from cls.hidden reach the worker's node.
        uis = {}
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 4, "height": 2}},
            "2": {"class_type": "DemoV3Gain",
                  "inputs": {"image": ["1", 0], "gain": 0.5, "mode": "mul"}},
        }, uis)
        self.assertEqual(uis["2"], [{"gain": [0.5]}])  # its NodeOutput's ui
        image, who = out["2"][0][0], out["2"][1][0]
        self.assertEqual(tuple(image.shape), (1, 2, 4, 3))
        self.assertAlmostEqual(float(image[0, 0, -1, 0]), 0.5)
        self.assertTrue(who.startswith("node 2, pid "), who)

    def test_v3_dynamic_inputs_are_expanded_by_comfyuis_code_and_nested_by_the_workers(self):
        from comfy_api.latest import io
        if not hasattr(io, "DynamicCombo"):
            self.skipTest("this ComfyUI has no dynamic inputs (they came in 0.8)")
        _io = sys.modules["comfy_api.latest._io"]
        proxy = self.classes["DemoV3Adjust"]
        # ComfyUI's own expansion over the proxy's schema (its validation and executor run it):
        # the choice's inputs, with the options the pack gave them.
        opened, _, v3_data = _io.get_finalized_class_inputs(
            proxy.INPUT_TYPES(), {"image": ["1", 0], "op": "scale", "op.factor": 3.0})
        self.assertEqual(opened["required"]["op.factor"][1]["max"], 4.0)
        self.assertEqual(v3_data["dynamic_paths"], {"op.factor": "op.factor", "op": "op.op"})
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 4, "height": 2}},
            "2": {"class_type": "DemoV3Adjust",
                  "inputs": {"image": ["1", 0], "op": "scale", "op.factor": 3.0}},
            "3": {"class_type": "DemoV3Adjust",
                  "inputs": {"image": ["1", 0], "op": "offset", "op.by": 0.25,
                             "op.mask": ["1", 0]}},
        })
        self.assertAlmostEqual(float(out["2"][0][0][0, 0, -1, 0]), 3.0)
        self.assertAlmostEqual(float(out["3"][0][0][0, 0, -1, 0]), 1.25)
        # The node got {op: {...}} as ComfyUI nests it, in its order, and its hidden values.
        self.assertEqual(out["2"][1][0], "['factor', 'op'] scale on node 2")
        self.assertEqual(out["3"][1][0], "['by', 'mask', 'op'] offset on node 3")
        # An Autogrow: the inputs the prompt gives, whatever their number.
        out = self.run_prompt({
            "1": {"class_type": "DemoV3Sum", "inputs": {"terms.x0": 1.5, "terms.x1": 2.0,
                                                        "terms.x2": 0.25}},
        })
        self.assertEqual(out["1"][0], [3.75])

    def test_a_worker_nodes_error_carries_the_packs_frames_as_in_process(self):
        import traceback
        from comfy_orch.host import NodeError
        try:  # not assertRaises: it drops the traceback
            self.run_prompt({"1": {"class_type": "DemoFail", "inputs": {"why": "here"}}})
        except NodeError as e:
            failed = e
        else:
            self.fail("DemoFail did not fail")
        self.assertIn("DemoFail failed here", str(failed))
        # What ComfyUI's execution_error sends the page: traceback.format_tb of what it caught.
        frames = traceback.format_tb(failed.__traceback__)
        self.assertIn(os.path.join("ComfyUI-OrchDemoA", "nodes", "__init__.py") + '", line ',
                      frames[-1])
        self.assertIn(", in fail\n", frames[-1])
        self.assertIn('raise ValueError("DemoFail failed " + why)', frames[-1])
        self.assertNotIn("^", frames[-1])  # no columns: they would not be the pack's
        self.assertIn("loader_harness.py", "".join(frames[:-1]))  # ComfyUI's own come first

    def test_an_object_of_comfyuis_process_crosses_to_a_worker_pickled(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoPlainMesh", "inputs": {}},
            "2": {"class_type": "DemoMeshInfo", "inputs": {"mesh": ["1", 0]}},
        })
        said = out["2"][0][0]
        self.assertTrue(said.startswith("SimpleNamespace of 2 vertices, made in pid %d, read in "
                                        "pid " % os.getpid()), said)
        self.assertNotIn("read in pid %d" % os.getpid(), said)
        self.assertTrue([line for line in self.log.lines
                         if "crosses from ComfyUI's process to env orchdemob-filters" in line])
        # One that cannot be pickled is refused before the call, naming the type and the fix.
        from comfy_orch.comfyui import _handover
        with self.assertRaises(TypeError) as refused:
            _handover.pickled(lambda: 1, "orchdemob-filters")
        self.assertIn("cannot be pickled", str(refused.exception))
        self.assertIn("register_serializer", str(refused.exception))

    def test_a_numpy_array_stays_numpy_where_nodes_get_torch_tensors(self):
        import numpy
        out = self.run_prompt({
            "1": {"class_type": "DemoBoxes", "inputs": {}},
            "2": {"class_type": "DemoBoxKinds", "inputs": {"boxes": ["1", 0]}},
        })
        self.assertEqual(out["2"][0], ["ndarray (2, 2, 3)"])
        out = loader_harness.execute({"1": {"class_type": "DemoBoxes", "inputs": {}}},
                                     dict(self.classes, DemoBoxes=_as_output_node(
                                         self.classes["DemoBoxes"])))
        self.assertIs(type(out["1"][0][0]["bboxes"]), numpy.ndarray)  # in ComfyUI's process

    def test_a_dicts_keys_keep_their_order_across_processes(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoPoints", "inputs": {}},
            "2": {"class_type": "DemoKeys", "inputs": {"value": ["1", 0]}},
        })
        self.assertEqual(out["2"][0], ["points,labels"])  # in the other env's worker
        out = loader_harness.execute({"1": {"class_type": "DemoPoints", "inputs": {}}},
                                     dict(self.classes, DemoPoints=_as_output_node(
                                         self.classes["DemoPoints"])))
        self.assertEqual(list(out["1"][0][0]), ["points", "labels"])  # in ComfyUI's process

    def test_a_v3_classs_own_input_is_list_attribute_is_what_comfyui_reads(self):
        out = self.run_prompt({
            "1": {"class_type": "DemoGradient", "inputs": {"width": 8, "height": 2}},
            "2": {"class_type": "DemoV3Sizes", "inputs": {"images": ["1", 0]}},
        })
        self.assertIs(self.classes["DemoV3Sizes"].INPUT_IS_LIST, True)
        self.assertEqual(out["2"][0], ["8"])  # the whole list, not one image iterated

    def test_list_flags_follow_comfyuis_executor(self):
        proxy = self.classes["DemoBatchSizes"]
        a = torch.zeros(1, 2, 8, 3)
        b = torch.zeros(1, 2, 16, 3)
        self.assertEqual(proxy().sizes(images=[a, b], orch_unique_id="9"), ([8, 16],))

    def test_progress_reaches_comfyuis_hook_and_its_interrupt_reaches_the_worker(self):
        seen = []
        comfy.utils.set_progress_bar_global_hook(
            lambda value, total, preview, node_id=None: seen.append((value, total, node_id)))
        try:
            self.assertEqual(self.run_prompt(
                {"7": {"class_type": "DemoSleep", "inputs": {"steps": 5}}})["7"][0], [5])
            self.assertIn((5, 5, "7"), seen)
            timer = threading.Timer(0.3, comfy.model_management.interrupt_current_processing)
            timer.start()
            started = time.monotonic()
            with self.assertRaises(comfy.model_management.InterruptProcessingException):
                self.run_prompt({"8": {"class_type": "DemoSleep", "inputs": {"steps": 500}}})
            self.assertLess(time.monotonic() - started, 5.0)
        finally:
            comfy.model_management.interrupt_current_processing(False)
            comfy.utils.set_progress_bar_global_hook(None)

    def test_sigterm_stops_the_workers_gracefully_before_comfyui_exits(self):
        # A second ComfyUI-like process over the same packs, ended as a service manager ends it.
        child = subprocess.Popen(
            [sys.executable, "-c", _SIGTERM_CHILD, os.path.dirname(loader_harness.__file__),
             CUSTOM_NODES], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, ORCH_LOG_LEVEL="info"))
        try:
            self.assertEqual(child.stdout.readline().strip(), "READY")
            child.send_signal(signal.SIGTERM)
            _out, err = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        self.assertEqual(child.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("SIGTERM: interrupting the workers and stopping them", err)
        # Both isolated envs' workers were stopped by the host (not by their parent-death signal).
        stopped = [line for line in err.splitlines() if "exited with 0" in line]
        self.assertEqual(len(stopped), 2, err)


# Loads the demo packs as ComfyUI would, says READY, and waits to be signalled.
_SIGTERM_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import comfyui_under_test
comfyui_under_test.prepare()
import comfy.model_management, comfy.utils  # as ComfyUI has them before it loads packs
import loader_harness
_classes, _display, failed = loader_harness.load_custom_nodes(sys.argv[2])
assert failed == {}, failed
print("READY", flush=True)
time.sleep(60)
"""


# Loads a tree whose one pack fails in its worker; says whether ComfyUI's process imported it.
_BROKEN_CHILD = """
import logging, os, sys
logging.basicConfig(level=logging.INFO)
sys.path.insert(0, sys.argv[1])
import comfyui_under_test
comfyui_under_test.prepare()
import comfy.model_management, comfy.utils
import loader_harness
classes, _display, failed = loader_harness.load_custom_nodes(sys.argv[2])
assert failed == {}, failed
assert classes == {}, classes
print("NOT IMPORTED HERE" if "ORCH_BROKEN_IMPORTED" not in os.environ else "IMPORTED HERE")
from comfy_orch.comfyui import _runtime
_runtime.stop()
"""


if __name__ == "__main__":
    unittest.main(verbosity=2)
