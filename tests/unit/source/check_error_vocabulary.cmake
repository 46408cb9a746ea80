# One error vocabulary (docs/errors.md): every orch::error code is a named constant from its
# layer's errc header, so no source builds an error from a string literal or compares a code with
# one. A literal here is how a pager's ORCH_OOM_RETRYABLE once became "OOM_RETRYABLE" on one side
# of the plugin seam and was compared with "out_of_memory" on the other.
set(layers ipc manifests orchestrator plugins support worker)
set(patterns
  "(^|[^a-z_])error\\{\""  # error{"code", ...} (not validation_error, ComfyUI's own types)
  "refused\\{\""          # a named error variable built from a literal
  "errno_error\\(\""      # errno_error("code", ...)
  "respond_error\\([^,]*, *\\{\""  # respond_error(header, {"code", ...})
  "code *[!=]= *\""       # err.code == "code"
  "\" *[!=]= *[a-z_.()]*code[^a-z_]"  # "code" == err.code
)
set(found "")
foreach(layer ${layers})
  file(GLOB_RECURSE sources ${SOURCE_DIR}/${layer}/*.cpp ${SOURCE_DIR}/${layer}/*.hpp)
  foreach(source ${sources})
    file(STRINGS ${source} lines)
    set(number 0)
    foreach(line IN LISTS lines)
      math(EXPR number "${number} + 1")
      foreach(pattern ${patterns})
        if(line MATCHES "${pattern}")
          file(RELATIVE_PATH where ${SOURCE_DIR} ${source})
          string(APPEND found "  ${where}:${number}: ${line}\n")
          break()
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "error codes written as string literals (use the layer's errc header, "
                      "docs/errors.md):\n${found}")
endif()
message(STATUS "every error code is a named constant")
