"""The node code every peer runs in bench_peers (docs/performance.md, "Peers"): an empty call and
an echo of its image. comfy-env calls these functions by module (`call_module`), pyisolate's
extension calls them from its methods, and comfy-orch's packs wrap them as ComfyUI nodes
(`node_classes`), so one function body is measured in all three."""


def empty():
    return None


def echo(image):
    return image


def node_classes(suffix):
    """ComfyUI's form of the two functions, as a pack's NODE_CLASS_MAPPINGS: PeerEmpty<suffix>
    and PeerEcho<suffix> (one pair per pack, since two packs may not define the same class)."""

    class PeerEmpty:
        RETURN_TYPES = ()
        FUNCTION = "run"
        OUTPUT_NODE = True

        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {}}

        def run(self):
            empty()
            return ()

    class PeerEcho:
        RETURN_TYPES = ("IMAGE",)
        FUNCTION = "run"

        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"image": ("IMAGE",)}}

        def run(self, image):
            return (echo(image),)

    return {"PeerEmpty" + suffix: PeerEmpty, "PeerEcho" + suffix: PeerEcho}
