# The libraries' graph, read from cmake/library_graph.txt (its one statement; docs/architecture.md,
# "Libraries"): each library links those it uses from there, so that what CMake links, what the
# direction check allows and what the documentation says cannot drift apart.
set(ORCH_LIBRARY_GRAPH ${CMAKE_CURRENT_LIST_DIR}/library_graph.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${ORCH_LIBRARY_GRAPH})
set(ORCH_LIBRARIES "")
file(STRINGS ${ORCH_LIBRARY_GRAPH} _orch_graph_lines REGEX "^[a-z]")
foreach(_orch_line IN LISTS _orch_graph_lines)
  string(REGEX REPLACE "[ \t]+" ";" _orch_fields "${_orch_line}")
  list(POP_FRONT _orch_fields _orch_name _orch_folder _orch_namespace)
  list(APPEND ORCH_LIBRARIES ${_orch_name})
  set(ORCH_LIBRARY_USES_${_orch_name} ${_orch_fields})
endforeach()

# orch_library_uses(<library> <var>): the targets of the libraries <library> uses, to link
# PUBLIC: orch::<name>, and the plugin C ABI's header-only orch::plugin_abi.
function(orch_library_uses library var)
  if(NOT library IN_LIST ORCH_LIBRARIES)
    message(FATAL_ERROR "${library} is not a library of ${ORCH_LIBRARY_GRAPH}")
  endif()
  set(targets "")
  foreach(used IN LISTS ORCH_LIBRARY_USES_${library})
    if(used STREQUAL "plugin")
      list(APPEND targets orch::plugin_abi)
    else()
      list(APPEND targets orch::${used})
    endif()
  endforeach()
  set(${var} ${targets} PARENT_SCOPE)
endfunction()

# orch_library_closure(<library> <var>): <library> and every library it uses, directly or
# through another.
function(orch_library_closure library var)
  set(seen ${library})
  set(pending ${library})
  while(pending)
    list(POP_FRONT pending name)
    foreach(used IN LISTS ORCH_LIBRARY_USES_${name})
      if(NOT used IN_LIST seen)
        list(APPEND seen ${used})
        list(APPEND pending ${used})
      endif()
    endforeach()
  endwhile()
  set(${var} ${seen} PARENT_SCOPE)
endfunction()
