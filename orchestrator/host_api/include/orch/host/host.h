/* The host runtime C API (docs/host-library.md): liborch_host.so. A process that is itself the
 * host (ComfyUI, through the comfy_orch.comfyui package and ctypes) starts the workers of a
 * deployment, reads the node classes they report, calls their nodes with values, and hands
 * tensors to them through the pinned pool, with the same supervision, budget, releases and
 * stand-ins as `comfy-orch run`.
 *
 * Requests and answers are JSON text in the shapes of docs/protocol.md (a node call's inputs and
 * outputs, tensors as pool descriptors); strings this library returns are freed with
 * orch_host_string_free. Exported symbols carry the version ORCH_HOST_1
 * (orchestrator/host_api/liborch_host.map); no exception crosses this boundary. Every struct starts with
 * struct_size and only ever grows at its end. Every function may be called from any thread
 * except from inside an event callback. */
#ifndef ORCH_HOST_HOST_H
#define ORCH_HOST_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_HOST_OK 0
#define ORCH_HOST_INVALID                                                                  \
  1                        /* refused: bad arguments, a bad deployment, a request or block \
                              that is not valid; the error text says which and the fix */
#define ORCH_HOST_FAILED 2 /* the host could not start, or a worker or node failed */
/* Not now (ORCH_HOST_2; orch_host_call only): the call may succeed if made again. */
#define ORCH_HOST_INTERRUPTED 3 /* the node stopped for orch_host_interrupt */
#define ORCH_HOST_RETRYABLE                                                                \
  4 /* its worker was lost, not ready yet, or its env is cooling down after a crash loop: \
       a new worker takes the next call */

typedef struct orch_host orch_host;

/* An event, as JSON: "worker" (a worker became ready or failed: env, state, pid, error),
 * "progress" (env, node, value, max), "message" (env, and a pack's message for ComfyUI's
 * clients: event, data, sid; or a preview with node, value and max: docs/comfyui.md, "A pack's
 * messages"; bytes as {"base64": text}, a preview's pixels as base64 text) and "log" (level,
 * message: the host's own log lines).
 * Called on the host's own threads; it must not call back into this API. */
typedef void (*orch_host_event_fn)(void* user, const char* type, const char* data);

typedef struct orch_host_options {
  uint32_t struct_size;
  uint32_t reserved;
  const char* deployment;      /* the deployment file (docs/deployment.md); or NULL, with comfyui */
  orch_host_event_fn on_event; /* may be NULL */
  void* user;                  /* passed to on_event */
  /* NULL: the comfy-orch-worker built or installed with this library, or
   * $ORCH_WORKER_EXECUTABLE. */
  const char* worker_executable;
  /* Appended in ORCH_HOST_2; read only where deployment is NULL. A ComfyUI tree to host, as
   * JSON: {"root", "custom_nodes"?, "device"?, "protocol_level"?, "memory"?: {[memory] key:
   * value}}, ComfyUI's own arguments as the [memory] flags (docs/host-library.md). */
  const char* comfyui;
} orch_host_options;

/* Validates the deployment (the file, or the one of the ComfyUI tree described), creates the
 * shared memory, starts one worker per usable env and
 * waits until each is ready or failed (the deployment's handshake timeout). On failure *host is
 * NULL and *error (when error is not NULL) is a JSON object {code, message, diagnostics}: each
 * diagnostic with file, line, column, key, severity, message. */
int32_t orch_host_start(const orch_host_options* options, orch_host** host, char** error);

/* {"classes": {class_type: schema}, "routes": [{class_type, env, pack, method, path, module,
 * handler, aiohttp?, socket?}], "workers": [{env, pid, state, error}], "skipped": [{env,
 * reason}]}; a schema is the worker's, with "env" added. A route (a pack's ROUTES entry) is
 * called with orch_host_call like a node: input "body" is its JSON request, output 0 its JSON
 * answer. One with "aiohttp" (registered on PromptServer.instance.routes in the worker) is served
 * over HTTP by its worker on the Unix socket "socket", which the host made: forward the request
 * there (docs/comfyui.md, "A pack's web side"). */
char* orch_host_nodes(orch_host* host);

/* A new prompt: returns its epoch, which every later call carries until the next one (ledger
 * workers reset their cast buffers when it changes, docs/memory-semantics.md). */
uint64_t orch_host_begin_prompt(orch_host* host);

/* One node call: request {"node", "class_type", "inputs": {name: value}, "hidden"?,
 * "method"?} (docs/protocol.md, "call"). *response is the worker's answer, {"status": "ok",
 * "outputs": [...], "held": [descriptor...]} or {"status": "error", "error": {node, type,
 * message, traceback?}}; "held" lists the blocks of the outputs this call handed to the
 * caller, each to be released once (orch_host_release). A tensor input must name a block the
 * caller holds. Returns ORCH_HOST_OK when the node ran; ORCH_HOST_INTERRUPTED when it stopped
 * for an interrupt and ORCH_HOST_RETRYABLE when its worker was lost or is not ready (not now:
 * the same call may succeed later); ORCH_HOST_FAILED when the node failed (never: the same call
 * fails again); ORCH_HOST_INVALID when the request was refused before it was sent (*response is
 * then {code, message}). */
int32_t orch_host_call(orch_host* host, const char* request, char** response);

/* A pool block of the caller's own: pinned, charged to the host's share of the one budget, to
 * fill and pass as a tensor input. */
typedef struct orch_host_block {
  uint32_t struct_size;
  uint32_t segment;
  uint64_t generation;
  uint64_t offset;
  uint64_t size;
  void* data; /* this process's mapping of the block */
} orch_host_block;

/* Allocates a block of `size` bytes (size in *block is what the descriptor says). */
int32_t orch_host_allocate(orch_host* host, uint64_t size, orch_host_block* block);
/* Fills block->data for a block the caller holds (from "held", or allocated). */
int32_t orch_host_map(orch_host* host, orch_host_block* block);
/* Drops the caller's hold on a block (allocated, or from "held"): once per hold. */
int32_t orch_host_release(orch_host* host, const orch_host_block* block);

/* ComfyUI's /free: each ready worker's receipt by env, as JSON. */
char* orch_host_free(orch_host* host, int32_t unload_models, int32_t free_memory);
/* Every worker's models as the host's stand-ins hold them (ORCH_HOST_2): [{env, key, size,
 * resident, sequence, generation}], resident being the worker's last receipt. */
char* orch_host_models(orch_host* host);
/* Asks env's worker to evict `bytes` (ORCH_HOST_2): ComfyUI's partially_unload of a stand-in.
 * *receipt is the worker's {freed, resident, models}, freed measured on the device. A worker of
 * another generation than `generation` (replaced since: the models it stood for are gone) is not
 * asked: ORCH_HOST_FAILED with {code: "stale_generation"}; a dead or busy-past-its-deadline
 * worker gives ORCH_HOST_FAILED with the call's error. */
int32_t orch_host_evict(orch_host* host, const char* env, uint32_t generation, uint64_t bytes,
                        char** receipt);
/* The caller's own pinned host memory (ComfyUI's pin_memory), charged to the host's slot of the
 * one pinned budget that the pool and every worker share (ORCH_HOST_2): ORCH_HOST_FAILED when
 * it does not fit (pin nothing then), else release the same bytes when unpinned. A release
 * never returns more than the caller's reservations hold. */
int32_t orch_host_pinned_reserve(orch_host* host, uint64_t bytes);
void orch_host_pinned_release(orch_host* host, uint64_t bytes);
/* Every process's memory row and every worker's state, as JSON (docs/runtime.md). */
char* orch_host_status(orch_host* host);
/* Interrupts the running node (its interrupted() turns true) for the current epoch. */
void orch_host_interrupt(orch_host* host);

void orch_host_string_free(char* text);

/* Shuts the workers down (gracefully, then forced), releases every block, frees the host. It is
 * the host's last call: no other thread may be inside a function of this API on the same host
 * when it starts, or enter one after (comfy_orch.host's stop waits for its calls to return). */
void orch_host_stop(orch_host* host);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_HOST_HOST_H */
