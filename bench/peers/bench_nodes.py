"""The node code every peer runs in bench_peers (docs/performance.md, "Peers"): an empty call, an
echo of its image (comfy-orch's best case: it recognises its own block coming back) and a new
image made from it (the image plus one: a new 64 MiB tensor that every peer must carry back).
comfy-env calls these functions by module (`call_module`), pyisolate's extension calls them from
its methods, and comfy-orch's packs wrap them as ComfyUI nodes (`node_classes`), so one function
body is measured in all three."""


def empty():
    return None


def echo(image):
    return image


def add_one(image):
    return image + 1


def node_classes(suffix):
    """ComfyUI's form of the three functions, as a pack's NODE_CLASS_MAPPINGS: PeerEmpty<suffix>,
    PeerEcho<suffix> and PeerAddOne<suffix> (one set per pack, since two packs may not define the
    same class)."""

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

    class PeerAddOne(PeerEcho):
        def run(self, image):
            return (add_one(image),)

    return {"PeerEmpty" + suffix: PeerEmpty, "PeerEcho" + suffix: PeerEcho,
            "PeerAddOne" + suffix: PeerAddOne}
