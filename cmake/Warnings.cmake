# orch_set_warnings(<target>): the project's warning set; -Werror when ORCH_WERROR is on.
function(orch_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
    -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual)
  # GCC warns of an anonymous-namespace type inside something with linkage only where the type
  # comes from an included file, as a header's would; a unity build includes sources, whose
  # anonymous types are the source's own as ever (CMakeLists.txt, ORCH_UNITY_BUILD).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(ORCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# C sources (plugin ABI headers are compiled as C too) do not accept the C++-only flags.
function(orch_set_c_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(ORCH_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
