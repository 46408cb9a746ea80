"""The V3 io module's shapes: typed inputs and outputs, the schema, the node base class."""

import enum


class Hidden(str, enum.Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"


class _Input:
    io_type = None

    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None):
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.lazy = lazy

    def get_io_type(self):
        return self.io_type

    def as_dict(self):
        out = {}
        for key in ("display_name", "tooltip", "lazy"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class _Widget(_Input):
    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None,
                 default=None, socketless=None, **options):
        super().__init__(id, display_name, optional, tooltip, lazy)
        self.default = default
        self.options_extra = options

    def as_dict(self):
        out = super().as_dict()
        if self.default is not None:
            out["default"] = self.default
        out.update({k: v for k, v in self.options_extra.items() if v is not None})
        return out


class _Output:
    io_type = None

    def __init__(self, id=None, display_name=None, tooltip=None, is_output_list=False):
        self.id = id
        self.display_name = display_name
        self.tooltip = tooltip
        self.is_output_list = is_output_list

    def get_io_type(self):
        return self.io_type


def _comfytype(io_type, widget):
    base = _Widget if widget else _Input

    class Type:
        class Input(base):
            pass

        class Output(_Output):
            pass

    Type.io_type = io_type
    Type.Input.io_type = io_type
    Type.Output.io_type = io_type
    return Type


def Custom(io_type):
    """A type of any name (a pack's own, or a core type the io module does not name)."""
    return _comfytype(io_type, False)


AnyType = _comfytype("*", False)
Int = _comfytype("INT", True)
Float = _comfytype("FLOAT", True)
String = _comfytype("STRING", True)
Boolean = _comfytype("BOOLEAN", True)
Image = _comfytype("IMAGE", False)
Mask = _comfytype("MASK", False)
Latent = _comfytype("LATENT", False)
Model = _comfytype("MODEL", False)


class Combo:
    io_type = "COMBO"

    class Input(_Widget):
        io_type = "COMBO"

        def __init__(self, id, options=None, **kwargs):
            super().__init__(id, **kwargs)
            self.options = list(options or [])

    class Output(_Output):
        io_type = "COMBO"


class Schema:
    def __init__(self, node_id, display_name=None, category="sd", inputs=None, outputs=None,
                 hidden=None, description="", is_output_node=False, is_input_list=False,
                 is_deprecated=False, is_experimental=False, not_idempotent=False):
        self.node_id = node_id
        self.display_name = display_name
        self.category = category
        self.inputs = inputs or []
        self.outputs = outputs or []
        self.hidden = hidden or []
        self.description = description
        self.is_output_node = is_output_node
        self.is_input_list = is_input_list
        self.is_deprecated = is_deprecated
        self.is_experimental = is_experimental
        self.not_idempotent = not_idempotent


class NodeOutput:
    def __init__(self, *args, ui=None, expand=None, block_execution=None):
        self.args = args
        self.ui = ui
        self.expand = expand
        self.block_execution = block_execution

    @property
    def result(self):
        return self.args if len(self.args) > 0 else None


class HiddenHolder:
    def __init__(self, unique_id=None, prompt=None, extra_pnginfo=None, dynprompt=None):
        self.unique_id = unique_id
        self.prompt = prompt
        self.extra_pnginfo = extra_pnginfo
        self.dynprompt = dynprompt


class ComfyNode:
    hidden = None

    @classmethod
    def define_schema(cls):
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs):
        raise NotImplementedError

    # ComfyUI's base class declares both; a node class that does not override them has none.
    @classmethod
    def validate_inputs(cls, **kwargs):
        raise NotImplementedError

    @classmethod
    def fingerprint_inputs(cls, **kwargs):
        raise NotImplementedError
