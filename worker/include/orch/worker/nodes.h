/* The native node ABI (docs/nodes.md): what a native pack's shared library
 * exports, and the node context the worker lends node code during one call.
 *
 * Pure C, so a pack may be written in C, C++ or anything with a C FFI. Every struct starts with
 * struct_size and fields are only ever appended (the plugin ABI's rule). No exception
 * may cross this boundary: node code catches its own and returns ORCH_NODE_ERROR.
 *
 * Ownership: everything a pack returns from orch_nodes_query is static and owned by the pack. The
 * context, the input values and every string in them are owned by the worker and valid only
 * during the execute call. Output strings are copied by the worker when execute returns. */
#ifndef ORCH_WORKER_NODES_H
#define ORCH_WORKER_NODES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_NODES_ABI_MAJOR 1u
/* 1.1 appended orch_node_class.schema_json, orch_node_api.fail_traceback and .hidden; 1.2
 * appended orch_node_class.validate_inputs and .is_changed; 1.3 appended orch_node_api.ui; 1.4
 * appended orch_node_api.expand. A
 * worker reads an appended field only when the element's struct_size covers it, and a node
 * checks the api's struct_size before calling an appended function (docs/nodes.md). */
#define ORCH_NODES_ABI_MINOR 4u
#define ORCH_NODES_ENTRY_SYMBOL "orch_nodes_query"

/* What execute returns. */
typedef int32_t orch_node_status;
#define ORCH_NODE_OK 0
#define ORCH_NODE_ERROR 1       /* the context's fail() says the error type and message */
#define ORCH_NODE_INTERRUPTED 2 /* the node saw interrupted() and stopped early */

/* Value kinds. A literal input (INT, FLOAT, BOOLEAN, STRING) arrives by kind; any other declared
 * type (IMAGE, MODEL, ...) is a link, carried as a tensor or, for same-worker objects such as a
 * loaded model, as a string handle. */
#define ORCH_VALUE_NONE 0u
#define ORCH_VALUE_INT 1u
#define ORCH_VALUE_FLOAT 2u
#define ORCH_VALUE_BOOL 3u
#define ORCH_VALUE_STRING 4u
#define ORCH_VALUE_TENSOR 5u
/* ABI 1.1: containers, so LATENT ({"samples": tensor, ...}) and CONDITIONING
 * ([[tensor, {...}], ...]) cross with their tensors in the pool. `i` is the item count and the
 * items are reached with orch_value_items() (below). */
#define ORCH_VALUE_LIST 6u
#define ORCH_VALUE_DICT 7u

#define ORCH_DTYPE_F32 1u
#define ORCH_DTYPE_U8 2u
#define ORCH_DTYPE_I64 3u

#define ORCH_TENSOR_MAX_DIMS 8u

/* A pinned-pool buffer as named between processes (orch::ipc::buffer_descriptor). */
typedef struct orch_buffer {
  uint32_t segment;
  uint32_t generation;
  uint64_t offset;
  uint64_t size;
} orch_buffer;

/* A tensor: dtype, shape and contiguous row-major strides (in elements) over a pool buffer.
 * `data` is this process's mapping of the buffer: read-only for inputs by convention (other
 * holders see the same bytes), writable for outputs the node allocated. */
typedef struct orch_tensor {
  uint32_t dtype;
  uint32_t ndim;
  int64_t shape[ORCH_TENSOR_MAX_DIMS];
  int64_t strides[ORCH_TENSOR_MAX_DIMS];
  void* data;
  orch_buffer buffer;
} orch_tensor;

typedef struct orch_value {
  uint32_t kind; /* ORCH_VALUE_* */
  uint32_t reserved0;
  int64_t i;        /* INT, BOOL (0/1) */
  double f;         /* FLOAT */
  const char* s;    /* STRING: NUL terminated */
  orch_tensor tensor;
} orch_value;

/* One item of a LIST (key NULL) or DICT (key: the item's name) value. */
typedef struct orch_value_item {
  const char* key;
  orch_value value;
} orch_value_item;

/* A LIST or DICT value's `i` items. They travel in the value's tensor.data field, which these
 * kinds do not otherwise use (orch_value's size is fixed: values are passed in arrays). Input
 * items belong to the worker for the call; a node's output items must stay valid until execute
 * returns, when the worker copies them. */
static inline const orch_value_item* orch_value_items(const orch_value* v) {
  const void* items =
      (v->kind == ORCH_VALUE_LIST || v->kind == ORCH_VALUE_DICT) ? v->tensor.data : NULL;
#ifdef __cplusplus
  return static_cast<const orch_value_item*>(items); /* no C-style cast for -Wold-style-cast */
#else
  return items;
#endif
}

/* Arrays of growable structs (orch_node_set.classes, orch_node_class.inputs) are walked by each
 * element's own struct_size: element i + 1 starts struct_size bytes after element i. A pack built
 * against a later minor, whose structs have grown, keeps working with an older worker, which
 * reads the fields it knows of each element and steps over the rest (docs/nodes.md). Elements
 * shorter than the fields of ABI 1.0 make the pack invalid. */

#define ORCH_INPUT_REQUIRED 1u
#define ORCH_INPUT_HAS_MIN 2u
#define ORCH_INPUT_HAS_MAX 4u
#define ORCH_INPUT_HAS_DEFAULT 8u
/* The input receives, as one DICT (its keys sorted by name), every input of the call that no
 * input of the class names: ComfyUI's V3 dynamic inputs (a DynamicCombo's "mode.size", an
 * Autogrow's "terms.x0", ...), whose names depend on the values of the prompt. At most one input
 * of a class has it; a worker older than it leaves the input empty. */
#define ORCH_INPUT_REST 16u

typedef struct orch_node_input {
  const char* name;
  const char* type; /* "INT", "FLOAT", "BOOLEAN", "STRING", or a link type such as "IMAGE" */
  uint32_t flags;   /* ORCH_INPUT_* */
  /* sizeof(orch_node_input) as the pack was built. It took the place of a reserved field that
   * packs had to zero, and 0 keeps its old meaning: the struct of ABI 1.0, which ends with
   * default_value. */
  uint32_t struct_size;
  double min;
  double max;
  orch_value default_value;
} orch_node_input;

#define ORCH_NODE_OUTPUT_NODE 1u    /* ComfyUI's OUTPUT_NODE: a root of execution */
/* ComfyUI's NOT_IDEMPOTENT: the execution cache keys the node by its id too, so two such nodes
 * with equal inputs are never served each other's outputs. */
#define ORCH_NODE_NOT_IDEMPOTENT 2u

typedef struct orch_node_context orch_node_context;

/* Runs the node. inputs[i] matches classes' inputs[i] (ORCH_VALUE_NONE for an absent optional
 * input); the node fills outputs[0 .. output_count). */
typedef orch_node_status (*orch_node_execute_fn)(orch_node_context* ctx, const orch_value* inputs,
                                                 orch_value* outputs);

typedef struct orch_node_class {
  uint32_t struct_size; /* sizeof(orch_node_class) as the pack was built: the array's stride */
  uint32_t flags;       /* ORCH_NODE_* */
  const char* class_type;
  const char* display_name;
  const char* category;
  const orch_node_input* inputs; /* input_count elements, walked by their own struct_size */
  uint32_t input_count;
  uint32_t output_count;
  const char* const* outputs; /* output type names, by slot */
  orch_node_execute_fn execute;
  /* ABI 1.1. ComfyUI's schema beyond what the fields above say, as a JSON object (NULL: none).
   * "inputs" maps an input name to its options ({"options": [...]} for a combo, "hidden",
   * "multiline", "step", "tooltip", ...); every other key ("return_names", "input_is_list",
   * "output_is_list", "description", "deprecated", ...) describes the class. The worker checks
   * that it parses as an object and passes it to the host with the class (docs/nodes.md). */
  const char* schema_json;
  /* ABI 1.2 (NULL: the class has none). ComfyUI's VALIDATE_INPUTS (while the host validates a
   * prompt) and IS_CHANGED (just before the node runs), called as execute is but outside any
   * node boundary and any prompt, with the node's literal inputs only (a linked input is
   * ORCH_VALUE_NONE; its type is the hidden value "INPUT_TYPES"). validate_inputs returns
   * ORCH_NODE_OK to accept the inputs, or ORCH_NODE_ERROR after fail() with the type
   * "custom_validation_failed" and the reason. is_changed fills outputs[0] with the inputs'
   * change key (ComfyUI's cache key); an error means "always changed". Neither may allocate
   * output tensors (output_tensor refuses), and interrupted() is never set for them. */
  orch_node_execute_fn validate_inputs;
  orch_node_execute_fn is_changed;
} orch_node_class;

typedef struct orch_node_set {
  uint32_t struct_size;
  uint32_t abi_major;
  const orch_node_class* classes; /* count elements, walked by their own struct_size */
  uint32_t count;
  uint32_t reserved0;
} orch_node_set;

/* The one exported symbol. Returns NULL when the pack cannot serve this ABI major. */
typedef const orch_node_set* (*orch_nodes_query_fn)(uint32_t abi_major);

/* A pager region a node keeps across calls (model weights), owned by the worker. */
typedef struct orch_node_region orch_node_region;

#define ORCH_LOG_LEVEL_DEBUG 1
#define ORCH_LOG_LEVEL_INFO 2
#define ORCH_LOG_LEVEL_WARN 3
#define ORCH_LOG_LEVEL_ERROR 4

/* What node code may do during a call. Status returns use orch_status of the plugin ABI
 * (0 = ORCH_OK; 1 = ORCH_OOM_RETRYABLE: free memory or stream, then retry; 2 = ORCH_DEVICE_ERROR;
 * 3 = ORCH_INVALID; 4 = ORCH_UNSUPPORTED; 9 = ORCH_HOST_OOM: a host allocation failed). Any
 * other value is an error too. */
typedef struct orch_node_api {
  uint32_t struct_size;
  uint32_t reserved0;
  /* A new tensor in the pinned pool, allocated by the host (the host alone writes allocation
   * metadata, docs/shared-memory.md). Contiguous strides are filled in; out->data is writable. */
  int32_t (*output_tensor)(orch_node_context* ctx, uint32_t dtype, uint32_t ndim,
                           const int64_t* shape, orch_tensor* out);
  /* The worker's pager region named `key`, created with `bytes` on first use (*created = 1) and
   * kept for the worker's life. UNSUPPORTED when the worker runs without a pager. */
  int32_t (*region)(orch_node_context* ctx, const char* key, uint64_t bytes,
                    orch_node_region** region, int32_t* created);
  /* Maps and pins [offset, offset+size) of a region (a layer's weights); unpin releases the pins.
   * OOM_RETRYABLE: the caller streams the weight instead (docs/plugin-abi.md). */
  int32_t (*region_fault)(orch_node_context* ctx, orch_node_region* region, uint64_t offset,
                          uint64_t size);
  int32_t (*region_unpin)(orch_node_context* ctx, orch_node_region* region, uint64_t offset,
                          uint64_t size);
  /* A cast buffer of at least `size` bytes for offload stream `stream`, through the allocator
   * plugin; valid until the next node boundary. */
  int32_t (*cast_buffer)(orch_node_context* ctx, uint32_t stream, uint64_t size,
                         uint64_t* address);
  /* Host-pinned memory the node keeps (a model's staging copy), reserved from this worker's slot
   * of the pinned budget (docs/shared-memory.md). Refused with OOM_RETRYABLE over the budget. */
  int32_t (*pinned_reserve)(orch_node_context* ctx, uint64_t bytes);
  void (*pinned_release)(orch_node_context* ctx, uint64_t bytes);
  /* ComfyUI's progress event for this node. */
  void (*progress)(orch_node_context* ctx, uint64_t value, uint64_t max);
  /* Non-zero once the prompt was interrupted: the node should return ORCH_NODE_INTERRUPTED. */
  int32_t (*interrupted)(orch_node_context* ctx);
  void (*log)(orch_node_context* ctx, int32_t level, const char* message);
  /* Records the typed error execute is about to return with ORCH_NODE_ERROR. */
  void (*fail)(orch_node_context* ctx, const char* error_type, const char* message);
  /* The prompt's node id and the number of offload streams (cast buffer streams). */
  const char* (*node_id)(orch_node_context* ctx);
  uint32_t (*streams)(orch_node_context* ctx);
  /* ABI 1.1 (present when struct_size covers it). The traceback of the error fail() recorded,
   * one line per entry, for ComfyUI's execution_error. */
  void (*fail_traceback)(orch_node_context* ctx, const char* const* lines, uint32_t count);
  /* ABI 1.1. ComfyUI's hidden value `kind` ("PROMPT", "EXTRA_PNGINFO"; "INPUT_TYPES" for
   * validate_inputs) for this call, as JSON text valid during the call; NULL when the host sent
   * none. */
  const char* (*hidden)(orch_node_context* ctx, const char* kind);
  /* ABI 1.3. ComfyUI's UI dict for this call (an output node's {"ui": {...}}: "images" as
   * [{"filename", "subfolder", "type"}], "text", ...), as JSON text of an object; what the
   * host's `executed` message carries and the history keeps. A later call replaces it.
   * ORCH_INVALID (nothing kept) for text that is not a JSON object, nests deeper than 8 levels
   * or exceeds 1 MiB. */
  int32_t (*ui)(orch_node_context* ctx, const char* json_object);
  /* ABI 1.4. ComfyUI's subgraph expansion for this call (a node's {"expand": graph}): the graph
   * as JSON text of an object ({node id: {"class_type", "inputs"}}), its outputs being links
   * into it ([node id, slot]). ComfyUI runs the graph in place of the node; a host that cannot
   * (comfy-orch run and serve) fails the node saying so. Same limits and answers as ui. */
  int32_t (*expand)(orch_node_context* ctx, const char* json_object);
} orch_node_api;

/* Whether the worker's api table holds the appended function `field` (ABI 1.1 on): a pack built
 * against a later minor may run in an older worker, whose table is shorter. */
#define ORCH_NODE_API_HAS(api, field)                                                   \
  ((api)->struct_size >= offsetof(orch_node_api, field) + sizeof((api)->field) && \
   (api)->field != NULL)

struct orch_node_context {
  const orch_node_api* api;
  void* impl; /* the worker's; opaque */
};

#ifdef __cplusplus
}
#endif

#endif /* ORCH_WORKER_NODES_H */
