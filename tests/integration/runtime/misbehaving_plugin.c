/* A library in a pack's plugin directory whose constructor crashes (FIXTURE_HANG unset) or never
 * returns (FIXTURE_HANG): the host must read such a directory in a probe process and survive. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void on_load(void) {
#ifdef FIXTURE_HANG
  for (;;) pause();
#else
  abort();
#endif
}
