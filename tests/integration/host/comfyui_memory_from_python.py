"""ComfyUI's memory manager over worker models (docs/comfyui.md, "Memory"), run by
test_comfyui_host.cpp like comfyui_from_python.py:

    python3 comfyui_memory_from_python.py <custom_nodes dir>

The fixture comfy.model_management follows ComfyUI's LoadedModel, free_memory and
unload_all_models; the workers are real, and every figure checked is a worker's receipt."""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "comfyui"))
import comfyui_under_test  # noqa: E402
comfyui_under_test.prepare()
import comfy.model_management as mm  # noqa: E402
import loader_harness  # noqa: E402

# The fixture's free-memory reading counts only the loaded models, so a partial free_memory
# stops part-way; a real ComfyUI on the CPU reads the machine's RAM, which the sim device's
# evictions need not move.
FIXTURE = comfyui_under_test.REAL_ROOT is None

CUSTOM_NODES = sys.argv.pop(1)
MiB = 1 << 20


def stand_ins():
    """{key: LoadedModel} of the worker models in ComfyUI's list."""
    return {getattr(lm.model, "key", None): lm for lm in mm.current_loaded_models
            if hasattr(lm.model, "generation")}


class ComfyUIMemory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.classes, _display, failed = loader_harness.load_custom_nodes(CUSTOM_NODES)
        assert failed == {}, failed
        from comfy_orch.comfyui import _runtime
        cls.host = _runtime._host

    @classmethod
    def tearDownClass(cls):
        from comfy_orch.comfyui import _runtime
        _runtime.stop()

    def run_prompt(self, prompt):
        return loader_harness.execute(prompt, self.classes)

    def resident(self, env_prefix, key):
        return sum(m["resident"] for m in self.host.models()
                   if m["env"].startswith(env_prefix) and m["key"] == key)

    def wait_ready(self, env_prefix, old_pid):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for w in self.host.status()["workers"]:
                if w["env"].startswith(env_prefix) and w["state"] == "ready" \
                        and w["pid"] != old_pid:
                    return w
            time.sleep(0.05)
        self.fail("worker %s did not come back" % env_prefix)

    def test_worker_models_are_evicted_by_comfyuis_free_memory_with_receipts(self):
        self.run_prompt({
            "1": {"class_type": "DemoLoadWeights", "inputs": {"name": "big", "size_mib": 64}},
            "2": {"class_type": "DemoLoadWeights", "inputs": {"name": "small", "size_mib": 32}},
        })
        listed = stand_ins()
        self.assertEqual(listed["big"].model_loaded_memory(), 64 * MiB)
        self.assertEqual(listed["small"].model_loaded_memory(), 32 * MiB)
        self.assertFalse(listed["big"].currently_used)
        device = mm.get_torch_device()
        free_before = mm.get_free_memory(device)
        # ComfyUI asks for 16 MiB more than is free: a partial unload, counted from the receipt.
        mm.free_memory(free_before + 16 * MiB, device)
        after = stand_ins()
        self.assertEqual(set(after), {"big", "small"})  # partly unloaded models stay listed
        held = sum(lm.model_loaded_memory() for lm in after.values())
        self.assertEqual(held, self.resident("orchdemoa", "big") +
                         self.resident("orchdemoa", "small"))
        self.assertGreaterEqual(96 * MiB - held, 16 * MiB)
        if FIXTURE:
            self.assertLess(96 * MiB - held, 64 * MiB)  # not everything: only what was asked
        # The Free button: unload_all_models empties the workers, and soft_empty_cache (called
        # once something unloaded) still runs ComfyUI's own and then frees every worker.
        calls = getattr(mm, "soft_empty_cache_calls", None)  # the fixture counts its own
        mm.unload_all_models()
        self.assertNotIn("big", stand_ins())
        self.assertNotIn("small", stand_ins())
        self.assertEqual(self.resident("orchdemoa", "big"), 0)
        self.assertEqual(self.resident("orchdemoa", "small"), 0)
        if calls is not None:
            self.assertEqual(mm.soft_empty_cache_calls, calls + 1)
        self.assertTrue(getattr(mm.soft_empty_cache, "_comfy_orch", False))
        # Loaded again by its node: back in ComfyUI's list at the node boundary.
        self.run_prompt({"1": {"class_type": "DemoLoadWeights",
                               "inputs": {"name": "big", "size_mib": 64}}})
        self.assertEqual(stand_ins()["big"].model_loaded_memory(), 64 * MiB)
        mm.unload_all_models()

    def test_a_model_a_worker_loads_through_comfyuis_patcher_is_one_stand_in_of_its_size(self):
        # Four 4 MiB Linear layers in a ModelPatcher, loaded with load_models_gpu in the worker
        # (layer by layer, then whole), torch imported inside the node: 16 MiB.
        size = 16 * MiB
        out = self.run_prompt({"1": {"class_type": "DemoLoadComfyModel",
                                     "inputs": {"layers": 4}}})
        self.assertEqual(out["1"][0][0], size)  # the worker's ComfyUI: one LoadedModel
        models = {k: v for k, v in stand_ins().items() if k.startswith("Sequential_")}
        self.assertEqual(len(models), 1, (sorted(stand_ins()), self.host.models()))
        (key, model), = models.items()
        self.assertEqual(model.model_loaded_memory(), size)
        self.assertEqual(self.resident("orchdemoa", key), size)
        # The Free button: the worker drops it, and its receipt is the whole model.
        mm.unload_all_models()
        self.assertNotIn(key, stand_ins())
        self.assertEqual(self.resident("orchdemoa", key), 0)

    @unittest.skipUnless(hasattr(mm, "unload_model_and_clones"),
                         "this ComfyUI has no unload_model_and_clones (0.3.64 and 0.8 have none)")
    def test_unloading_a_host_model_and_its_clones_passes_worker_models_by(self):
        self.run_prompt({"1": {"class_type": "DemoLoadWeights",
                               "inputs": {"name": "kept", "size_mib": 8}}})
        self.assertIn("kept", stand_ins())

        class HostPatcher:  # a model of ComfyUI's own, not loaded: a custom node unloads it
            clone_base_uuid = object()

        self.assertFalse(mm.unload_model_and_clones(HostPatcher()))  # reads every entry's uuid
        self.assertIn("kept", stand_ins())
        self.assertEqual(self.resident("orchdemoa", "kept"), 8 * MiB)
        mm.unload_all_models()

    def test_a_worker_killed_inside_free_memory_leaves_the_list_consistent(self):
        self.run_prompt({
            "1": {"class_type": "DemoLoadWeights", "inputs": {"name": "doomed", "size_mib": 16}},
            "2": {"class_type": "DemoLoadLut", "inputs": {"size_mib": 16}},
        })
        doomed, lut = stand_ins()["doomed"].model, stand_ins()["lut"].model
        pid = next(w["pid"] for w in self.host.status()["workers"]
                   if w["env"].startswith("orchdemoa"))
        original = mm.get_free_memory
        killed = []

        def free_reading_that_kills_a_worker(*args, **kwargs):
            if not killed:  # inside ComfyUI's loop, before the first model is asked
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            return original(*args, **kwargs)

        mm.get_free_memory = free_reading_that_kills_a_worker
        try:
            mm.unload_all_models()  # must not raise
        finally:
            mm.get_free_memory = original
        self.assertEqual(killed, [pid])
        self.assertEqual(stand_ins(), {})  # both gone from the list, nothing dead left in it
        self.assertEqual(self.resident("orchdemob", "lut"), 0)  # evicted by its receipt
        self.assertTrue(doomed.gone)
        with self.assertRaises(RuntimeError) as caught:
            doomed.partially_load(mm.get_torch_device(), 1 << 20)
        self.assertIn("doomed", str(caught.exception))
        self.assertIsNone(lut.gone)
        # The replacement worker has none of the old models: the next node boundary adds none.
        self.wait_ready("orchdemoa", pid)
        self.run_prompt({"2": {"class_type": "DemoLoadLut", "inputs": {"size_mib": 16}}})
        self.assertEqual(set(stand_ins()), {"lut"})
        mm.unload_all_models()

    @unittest.skipIf(not FIXTURE and not torch.cuda.is_available(),
                     "a real ComfyUI pins host memory only for a CUDA device")
    def test_comfyuis_pinning_is_charged_to_the_one_budget(self):
        def host_pinned():
            return next(r["pinned_reserved_bytes"] for r in self.host.status()["memory"]
                        if r["process"] == "host")

        before = host_pinned()
        t = torch.zeros(MiB, dtype=torch.uint8)
        self.assertTrue(mm.pin_memory(t))
        self.assertEqual(host_pinned(), before + MiB)
        self.assertTrue(mm.unpin_memory(t))
        self.assertEqual(host_pinned(), before)

        # A tensor ComfyUI pinned before comfy-orch started was never charged: its unpin
        # returns nothing that another tensor's pin holds.
        early, later = torch.zeros(MiB, dtype=torch.uint8), torch.zeros(MiB, dtype=torch.uint8)
        self.assertTrue(mm.pin_memory.__wrapped__(early))  # ComfyUI's own, unpatched
        self.assertTrue(mm.pin_memory(later))
        self.assertTrue(mm.unpin_memory(early))
        self.assertEqual(host_pinned(), before + MiB)
        self.assertTrue(mm.unpin_memory(later))
        self.assertEqual(host_pinned(), before)

        class Huge:  # more than any machine's budget: refused before ComfyUI pins anything
            def numel(self):
                return 1 << 48

            def element_size(self):
                return 4

            def data_ptr(self):
                return 12345

        total = mm.TOTAL_PINNED_MEMORY
        self.assertFalse(mm.pin_memory(Huge()))
        self.assertEqual(mm.TOTAL_PINNED_MEMORY, total)
        self.assertEqual(host_pinned(), before)

    def test_an_eviction_that_fails_for_now_frees_nothing_and_one_of_a_dead_worker_all(self):
        from comfy_orch.comfyui._stand_ins import StandIn
        from comfy_orch.host import HostError

        class Failing:  # the host's answer to one evict, as the library gives it
            def __init__(self, code):
                self.code = code

            def evict(self, env, generation, nbytes):
                raise HostError(self.code, "as the host says it")

        busy = StandIn(Failing("deadline_exceeded"), "env", "m", 1, 8 * MiB, 8 * MiB, "cpu")
        self.assertEqual(busy.partially_unload("cpu", 4 * MiB), 0)
        self.assertEqual((busy.loaded_size(), busy.gone), (8 * MiB, None))
        self.assertEqual(busy.partially_unload("cpu", 0), 0)  # nothing asked, nothing freed
        self.assertEqual(busy.loaded_size(), 8 * MiB)
        dead = StandIn(Failing("worker_died"), "env", "m", 1, 8 * MiB, 8 * MiB, "cpu")
        self.assertEqual(dead.partially_unload("cpu", 4 * MiB), 8 * MiB)
        self.assertEqual(dead.loaded_size(), 0)
        self.assertIsNotNone(dead.gone)

    def test_the_host_follows_comfyuis_arguments_and_aimdo_level(self):
        from comfy_orch.comfyui import _memory
        self.assertEqual([_memory.aimdo_level(v) for v in
                          ("0.2.9", "0.3.0", "0.4.9", "0.4.10", "0.4.11", "1.0", "x")],
                         [1, 2, 2, 3, 4, 4, None])
        args = argparse.Namespace(highvram=True, reserve_vram=1.5, async_offload=3,
                                  disable_pinned_memory=False)
        host, memory, why = _memory.deployment_settings(args, "0.4.10")
        self.assertEqual(host, {"protocol_level": 3})
        self.assertEqual(memory, {"highvram": True, "reserve_vram": int(1.5 * (1 << 30)),
                                  "async_offload_streams": 3})
        _host, memory, why = _memory.deployment_settings(argparse.Namespace(), "")
        self.assertEqual(memory, {"disable_dynamic_vram": True})  # no aimdo: ComfyUI's ledger
        self.assertTrue(any("no comfy-aimdo" in w for w in why))

    def test_a_host_started_from_comfyuis_tree_follows_its_arguments(self):
        # What a ComfyUI without COMFY_ORCH_DEPLOYMENT does: no deployment file, the tree
        # described to the library, plugins found beside it (not beside python3).
        from comfy_orch.comfyui import _runtime
        from comfy_orch.host import Host
        import comfy.cli_args
        with tempfile.TemporaryDirectory() as tree:
            os.makedirs(os.path.join(tree, "comfy"))
            os.makedirs(os.path.join(tree, "custom_nodes"))
            saved = comfy.cli_args.args
            comfy.cli_args.args = argparse.Namespace(highvram=True, reserve_vram=0.25)
            try:
                description = _runtime.description_for(tree)
            finally:
                comfy.cli_args.args = saved
            self.assertEqual(description["memory"]["highvram"], True)
            self.assertEqual(description["memory"]["reserve_vram"], 1 << 28)
            self.assertEqual(description["custom_nodes"], os.path.join(tree, "custom_nodes"))
            description["device"] = "sim"  # this machine has no GPU; ComfyUI's would be cpu
            # Without comfy-aimdo ComfyUI runs its own ledger, and says so first.
            self.assertEqual(description["memory"]["disable_dynamic_vram"], True)
            with Host(comfyui=description) as second:
                row = second.status()["memory"][0]
                self.assertEqual((row["process"], row["manager"]), ("host", "ledger"))
                self.assertIn("--disable-dynamic-vram", row["reason"])

    def test_the_canary_passes_the_fixture_and_refuses_one_with_a_member_removed(self):
        fixture = os.path.dirname(os.path.dirname(os.path.abspath(mm.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in sys.path if os.path.isdir(os.path.join(p, "comfy_orch"))))

        def check(root, *flags):
            return subprocess.run([sys.executable, "-m", "comfy_orch.comfyui.check", root,
                                   *flags], env=env, capture_output=True, text=True, timeout=60)

        # Without --cpu, ComfyUI's model_management does not import on a machine without CUDA:
        # the canary names the exception and the fix, not every member "MISSING".
        if not os.path.exists("/dev/nvidiactl"):
            bare = check(fixture)
            self.assertEqual(bare.returncode, 1, bare.stdout + bare.stderr)
            self.assertIn("cannot import comfy.model_management: AssertionError: Torch not "
                          "compiled with CUDA enabled", bare.stdout)
            self.assertIn("comfy_orch.comfyui.check <root> --cpu", bare.stdout)
            self.assertNotIn("MISSING", bare.stdout)
        ok = check(fixture, "--cpu")
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertIn("ok: comfy-orch can patch this ComfyUI", ok.stdout)
        self.assertIn("ok       fatal   comfy.model_patcher.ModelPatcher.detach", ok.stdout)
        with tempfile.TemporaryDirectory() as tree:
            # The tree with one member renamed: every entry linked but comfy/, whose files are
            # linked but model_management.py (comfy/ imports the tree's top-level modules).
            for name in os.listdir(fixture):
                if name != "comfy":
                    os.symlink(os.path.join(fixture, name), os.path.join(tree, name))
            os.mkdir(os.path.join(tree, "comfy"))
            for name in os.listdir(os.path.join(fixture, "comfy")):
                if name != "model_management.py":
                    os.symlink(os.path.join(fixture, "comfy", name),
                               os.path.join(tree, "comfy", name))
            path = os.path.join(tree, "comfy", "model_management.py")
            shutil.copyfile(os.path.join(fixture, "comfy", "model_management.py"), path)
            with open(path) as f:
                text = f.read()
            self.assertIn("def unload_all_models(", text)
            with open(path, "w") as f:
                f.write(text.replace("def unload_all_models(", "def renamed_unload_all_models("))
            refused = check(tree, "--cpu")
            self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
            self.assertIn("MISSING  fatal   comfy.model_management.unload_all_models",
                          refused.stdout)
            self.assertIn("will not patch", refused.stdout)
        self.assertEqual(check(os.path.join(fixture, "comfy")).returncode, 2)  # not a tree
        # In ComfyUI's process, the integration refuses the same way before patching anything.
        from comfy_orch.comfyui import _memory
        saved = mm.unload_all_models
        del mm.unload_all_models
        try:
            self.assertIsNone(_memory.integrate(self.host))
        finally:
            mm.unload_all_models = saved


if __name__ == "__main__":
    unittest.main(verbosity=2)
