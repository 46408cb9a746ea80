/* The worker runtime C ABI (docs/architecture.md; usable from Python later, e.g. via ctypes from a
 * Python worker that hosts its own node loop). Today it runs a native worker end to end.
 *
 * No exception crosses it; the return value is a process exit status (docs/runtime.md). */
#ifndef ORCH_WORKER_WORKER_H
#define ORCH_WORKER_WORKER_H

#include <stdint.h>

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
  const char* library;    /* the native node library to load */
} orch_worker_options;

/* Runs the worker until the host asks it to shut down or goes away. */
int32_t orch_worker_run(const orch_worker_options* options);

#ifdef __cplusplus
}
#endif

#endif /* ORCH_WORKER_WORKER_H */
