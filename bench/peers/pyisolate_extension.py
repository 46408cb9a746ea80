"""pyisolate's side of bench_peers: the extension class (ExtensionBase) whose methods call
bench_nodes' functions in the extension's process. Its package (written by bench_peers) imports
this module; the host imports it too, for the class."""

import importlib

from pyisolate import ExtensionBase


class PeerExtension(ExtensionBase):
    async def on_module_loaded(self, module):
        # The extension's package names the node module it runs (with or without torch).
        self.nodes = importlib.import_module(module.NODE_MODULE)

    async def empty(self):
        return self.nodes.empty()

    async def echo(self, image):
        return self.nodes.echo(image)

    async def add_one(self, image):
        return self.nodes.add_one(image)
