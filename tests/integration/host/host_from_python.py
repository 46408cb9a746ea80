"""comfy_orch.host over liborch_host.so in a real interpreter (run by test_host_api.cpp):
python3 host_from_python.py <deployment>, with ORCH_HOST_LIBRARY set. The deployment has the
native test pack and the PyContract Python pack, on a 32 MiB pool."""

import gc
import sys
import unittest

import numpy as np

from comfy_orch.host import Host, HostError, NodeError

DEPLOYMENT = sys.argv.pop(1)


def prompt_of(node, class_type):
    return {"PROMPT": {node: {"class_type": class_type, "inputs": {}}}}


class HostFromPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.events = []
        cls.host = Host(DEPLOYMENT, on_event=lambda kind, data: cls.events.append((kind, data)))

    @classmethod
    def tearDownClass(cls):
        cls.host.stop()

    def test_the_classes_of_native_and_python_workers_are_listed_with_their_env(self):
        nodes = self.host.nodes()
        self.assertEqual(nodes["classes"]["TestBlob"]["env"], "native-nodes")
        self.assertEqual(nodes["classes"]["Describe"]["env"], "pycontract-nodes")
        self.assertEqual(nodes["skipped"], [])
        self.assertEqual(sorted(w["state"] for w in nodes["workers"]), ["ready", "ready"])

    def test_an_array_of_this_process_is_copied_in_once_and_read_by_the_worker(self):
        image = np.full((1, 4, 4, 3), 0.5, np.float32)
        kind, where, total, _ = self.host.call("Describe", {"image": image}, node="3",
                                               hidden=prompt_of("3", "Describe"))
        self.assertEqual(kind, "numpy ndarray float32 (1, 4, 4, 3)")
        self.assertTrue(where.startswith("/memfd:orch-pool-"), where)
        self.assertEqual(total, 0.5 * 48)

    def test_a_workers_tensor_is_a_view_and_comes_back_as_the_same_object(self):
        image, made_at = self.host.call("MakeImage", {"value": 2.0})
        self.assertIsInstance(image, np.ndarray)
        self.assertEqual(float(image.sum()), 2.0 * 96)
        passed, passed_at = self.host.call("PassThrough", {"image": image})
        self.assertIs(passed, image)  # identity kept: the block the worker was given, unchanged
        self.assertEqual(passed_at, made_at)
        # Given back to a node, the view is the same block, not a copy.
        _, seen_at, total, _ = self.host.call("Describe", {"image": image}, node="4",
                                              hidden=prompt_of("4", "Describe"))
        self.assertEqual(seen_at, made_at)
        self.assertEqual(total, 2.0 * 96)

    def test_a_view_reshaped_in_place_goes_back_with_its_new_shape(self):
        image, _ = self.host.call("MakeImage", {"value": 1.0})
        image.shape = (1, 96, 1, 1)  # the same object, no longer the worker's layout
        kind, _, total, _ = self.host.call("Describe", {"image": image}, node="8",
                                           hidden=prompt_of("8", "Describe"))
        self.assertEqual(kind, "numpy ndarray float32 (1, 96, 1, 1)")
        self.assertEqual(total, 96.0)

    def test_a_view_kept_past_its_hosts_stop_stays_readable(self):
        other = Host(DEPLOYMENT)
        image, _ = other.call("MakeImage", {"value": 3.0})
        other.stop()
        other.stop()  # twice is harmless
        self.assertEqual(float(image.sum()), 3.0 * 96)  # stale bytes, never unmapped memory
        with self.assertRaises(HostError) as caught:
            other.call("MakeImage", {"value": 1.0})
        self.assertEqual(caught.exception.code, "stopped")

    def test_a_block_is_released_when_its_last_view_goes(self):
        # 8 MiB blocks on a 32 MiB pool: ten of them fit only if each goes back when dropped.
        for _ in range(10):
            blob = self.host.call("TestBlob", {"mib": 8})[0]
            self.assertEqual(self.host.call("TestBlobPeek", {"blob": blob}), [16])
            del blob
            gc.collect()
        for _ in range(10):
            image = np.zeros((1, 1024, 1024, 2), np.float32)  # 8 MiB copied in per call
            self.assertEqual(self.host.call("Describe", {"image": image}, node="5",
                                            hidden=prompt_of("5", "Describe"))[2], 0.0)
        # Kept views keep their blocks: four 8 MiB ones exhaust the pool for a fifth.
        kept = [self.host.call("TestBlob", {"mib": 8})[0] for _ in range(3)]
        with self.assertRaises(NodeError):
            kept.append(self.host.call("TestBlob", {"mib": 8})[0])
            kept.append(self.host.call("TestBlob", {"mib": 8})[0])
        del kept
        gc.collect()
        self.host.call("TestBlob", {"mib": 8})

    def test_a_node_error_carries_its_type_message_and_traceback(self):
        with self.assertRaises(NodeError) as caught:
            self.host.call("Raise", {"message": "no good"}, node="6")
        e = caught.exception
        self.assertEqual(e.node, "6")
        self.assertIn("no good", e.message)
        self.assertTrue(e.traceback)
        self.assertFalse(e.interrupted or e.retryable)  # never: the same call fails again

    def test_a_refused_request_raises_host_error_with_the_reason(self):
        with self.assertRaises(HostError) as caught:
            self.host.call("NoSuchNode", {})
        self.assertEqual(caught.exception.code, "missing_node_type")

    def test_a_deployment_that_does_not_start_names_each_error_in_the_message(self):
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            broken = os.path.join(tmp, "broken.toml")
            with open(broken, "w") as f:
                f.write("[host]\ndevice = \"sim\"\n[shm]\npinned_pool_size = \"lots\"\n")
            with self.assertRaises(HostError) as caught:
                Host(broken)
        text = str(caught.exception)
        self.assertIn("nothing started", text)
        self.assertIn("broken.toml:4:", text)  # file and line of the bad value
        self.assertIn("pinned_pool_size", text)  # its key
        self.assertIn("fix:", text)

    def test_status_and_free_answer(self):
        rows = self.host.status()["memory"]
        self.assertEqual([r["process"] for r in rows][0], "host")
        self.assertEqual(len(rows), 3)
        receipts = self.host.free()
        self.assertEqual(sorted(receipts), ["native-nodes", "pycontract-nodes"])

    def test_z_with_torch_imported_views_are_torch_tensors(self):
        import torch
        image, _ = self.host.call("MakeImage", {"value": 1.0})
        self.assertIsInstance(image, torch.Tensor)
        self.assertIs(self.host.call("PassThrough", {"image": image})[0], image)
        # A CPU torch tensor of this process goes in with one copy.
        total = self.host.call("Describe", {"image": torch.ones(1, 2, 2, 3)}, node="7",
                               hidden=prompt_of("7", "Describe"))[2]
        self.assertEqual(total, 12.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
