/* The interpreter the asan preset's Python tests run (docs/sanitizers.md): Debian's CPython
 * (libpython3.11) behind a main() built with AddressSanitizer and UBSan, so that the sanitizers'
 * runtime is in the process before a sanitized liborch_worker.so or liborch_host.so is loaded
 * through ctypes, as it is in comfy-orch's own executables. Nothing is preloaded: the processes
 * this interpreter starts (native workers, tools) get nothing of it.
 *
 * Its defaults, compiled in so that no variable travels to those processes: a report fails the
 * process on the first one, and LeakSanitizer leaves out what CPython, numpy and torch keep for
 * the life of the process (each entry a whole third-party library, none of comfy-orch's). */
#include <Python.h>

const char* __asan_default_options(void) {
  return "detect_leaks=1:halt_on_error=1:strict_string_checks=1";
}

const char* __ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

/* Quiet about what it suppressed: the host reads this interpreter's output (its stack probe). */
const char* __lsan_default_options(void) { return "print_suppressions=0"; }

const char* __lsan_default_suppressions(void) {
  return
      /* CPython 3.11: interned strings, module dicts and static types live until exit. */
      "leak:libpython3\n"
      /* numpy: its type and ufunc tables, allocated once on import. */
      "leak:_multiarray_umath\n"
      /* torch 1.13: registries, JIT bindings and dispatcher tables built on import. */
      "leak:libtorch_python\n"
      "leak:libtorch_cpu\n"
      "leak:libc10\n"
      /* OpenSSL 3 (hashlib, ssl: aiohttp in the ComfyUI-side tests): its providers and error
       * tables, freed only by OPENSSL_cleanup, which CPython does not call. */
      "leak:libcrypto\n";
}

int main(int argc, char** argv) { return Py_BytesMain(argc, argv); }
