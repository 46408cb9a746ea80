/* The worker runtime C API (docs/architecture.md, docs/python.md): liborch_worker.so. The
 * comfy-orch-worker executable is this library with a native pack's node library; a Python
 * worker (`python -m comfy_orch.worker`) is this library with the node set the comfy_orch
 * package builds from a Python pack, through ctypes. Either way it is one runtime: the same
 * handshake, plugins, pinned pool, releases and stand-ins.
 *
 * Exported symbols carry the version ORCH_WORKER_1 (worker/liborch_worker.map); no exception
 * crosses this boundary. Every struct starts with struct_size and only ever grows at its end. */
#ifndef ORCH_WORKER_WORKER_H
#define ORCH_WORKER_WORKER_H

#include <stdint.h>

#include "orch/worker/nodes.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_WORKER_EXIT_OK 0
#define ORCH_WORKER_EXIT_USAGE 64
#define ORCH_WORKER_EXIT_HANDSHAKE 65 /* the host refused us, or the handshake failed */
#define ORCH_WORKER_EXIT_SETUP 66     /* a plugin, segment or the node library failed */

typedef struct orch_worker_options {
  uint32_t struct_size;
  int32_t channel_fd;     /* the socketpair end of the framed channel (inherited) */
  int32_t fd_socket;      /* the socketpair end that carries segment fds (inherited) */
  uint32_t generation;    /* stamped on every frame; the host drops other generations */
  const char* token;      /* the startup token the host expects back in hello */
  const char* env_name;   /* for logs */
  const char* library;    /* the native node library to load; NULL when `nodes` is given */
  /* Appended: the node classes to serve instead of a library's (a Python pack's). It and
   * everything it points to must outlive the run. */
  const orch_node_set* nodes;
  /* Appended: set when the caller could not build its node set (a Python pack whose import
   * raised). The worker still does the handshake, so the host records this text as the env's
   * cause (and does not restart it), then exits with ORCH_WORKER_EXIT_SETUP. */
  const char* setup_error;
} orch_worker_options;

/* Runs the worker until the host asks it to shut down or goes away. Nodes execute on the
 * calling thread (a Python worker's main thread, as in ComfyUI); the channel and the heartbeat
 * run on threads of their own. Returns a process exit status (ORCH_WORKER_EXIT_*). */
int32_t orch_worker_run(const orch_worker_options* options);

/* The worker's command line (comfy-orch-worker --help lists it: --channel-fd, --fd-socket,
 * --token-fd, --generation, --env, and --library unless `nodes` or `setup_error` is given),
 * parsed into options, then orch_worker_run. Sets up logging tagged with the env. Usage errors
 * print their cause and return ORCH_WORKER_EXIT_USAGE. argv[0] is the program name. */
int32_t orch_worker_main(int argc, const char* const* argv, const orch_node_set* nodes,
                         const char* setup_error);

/* ORCH_WORKER_1.1: orch_worker_main in two steps, for a caller that builds its node set after
 * the process started (a Python worker imports its pack): orch_worker_begin parses the command
 * line (--library is not required), reads the token and starts the handshake and the memory
 * set-up on the library's own thread, so they overlap the import; orch_worker_serve then
 * supplies the node set, or `setup_error` (as in orch_worker_options), and runs the worker on
 * the calling thread exactly as orch_worker_run does. orch_worker_begin returns NULL, with the
 * exit status in *status, when the worker cannot go on (--help, a usage error, no segments from
 * the host); orch_worker_serve takes the handle over, frees it, and returns the exit status. */
typedef struct orch_worker orch_worker;
orch_worker* orch_worker_begin(int argc, const char* const* argv, int32_t* status);
int32_t orch_worker_serve(orch_worker* worker, const orch_node_set* nodes, const char* setup_error);

/* One line in the worker's log, tagged with its env (ORCH_LOG_LEVEL_* of nodes.h). For output
 * that is not tied to a node call: a Python pack's print and logging. */
void orch_worker_log(int32_t level, const char* message);

/* ORCH_WORKER_1.2: a message for ComfyUI's clients (docs/comfyui.md, "A pack's messages"), from
 * any thread of a worker begun with orch_worker_begin, at any time: `body` is a JSON object,
 * {"event": name or binary event number, "data": ..., "sid": client or null}, or a "preview"
 * ({"node", "value", "max", "preview": {"format", "width", "height", "max_size"}}). When
 * `binary` is not NULL, its `binary_size` bytes become the value of key `binary_key` of
 * `body`, or of body["preview"] for a preview's "pixels": they stay bytes. Returns 0 when sent,
 * 1 when dropped because the channel to the host is full or gone (a flood), -1 for a body that
 * is not a JSON object or a message over the frame cap. */
int32_t orch_worker_message(const char* body, const char* binary_key, const uint8_t* binary,
                            size_t binary_size);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_WORKER_WORKER_H */
