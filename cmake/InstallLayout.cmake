# Where everything lands, in the build tree and under an installed prefix (GNUInstallDirs), and
# how the host finds its files from its own location (orchestrator/process/src/install_layout.cpp,
# docs/deployment.md "Install and relocation"). Only relative paths reach the host's code, so an
# installed prefix can be moved and a build directory can be anywhere.
include(GNUInstallDirs)

# Under the prefix: bin/ holds both executables, lib/comfy-orch/ the plugins and the example
# packs' node libraries, include/ the C ABI headers, lib/cmake/comfy_orch/ the CMake package.
set(ORCH_INSTALL_PLUGIN_DIR ${CMAKE_INSTALL_LIBDIR}/comfy-orch/plugins)
set(ORCH_INSTALL_NODE_DIR ${CMAKE_INSTALL_LIBDIR}/comfy-orch/nodes)
set(ORCH_INSTALL_WORKER_LIBRARY_DIR ${CMAKE_INSTALL_LIBDIR}/comfy-orch)
set(ORCH_INSTALL_PYTHON_DIR ${CMAKE_INSTALL_DATADIR}/comfy-orch/python)
set(ORCH_INSTALL_FRONTEND_DIR ${CMAKE_INSTALL_DATADIR}/comfy-orch/frontend)
set(ORCH_INSTALL_TEMPLATES_DIR ${CMAKE_INSTALL_DATADIR}/comfy-orch/templates)
# ComfyUI's official frontend as scripts/install-deps unpacks it (docs/serve.md).
set(ORCH_FRONTEND_DIR ${PROJECT_SOURCE_DIR}/.deps/frontend/static)
# ComfyUI's official workflow templates, likewise (docs/serve.md, "Workflow templates").
set(ORCH_TEMPLATES_DIR ${PROJECT_SOURCE_DIR}/.deps/templates)
set(ORCH_INSTALL_EXAMPLES_DIR ${CMAKE_INSTALL_DATADIR}/comfy-orch/examples)
set(ORCH_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/comfy_orch)

# In the build tree: every plugin in one directory (so `comfy-orch plugins --dir` finds them
# together) and the example packs' libraries in another.
set(ORCH_PLUGIN_DIR ${PROJECT_BINARY_DIR}/plugins/lib)
set(ORCH_NODE_LIBRARY_DIR ${PROJECT_BINARY_DIR}/examples)
# The example packs' targets, which examples/CMakeLists.txt adds when ORCH_BUILD_EXAMPLES is on.
set(ORCH_EXAMPLE_PACKS "" CACHE INTERNAL "")

# orch_add_layout_definitions(<target> HOST <host executable> WORKER <worker executable>):
# compile definitions
# ORCH_LAYOUT_{INSTALLED,BUILD}_{WORKER,PLUGINS,NODES,WORKER_LIBRARY,PYTHON,FRONTEND,TEMPLATES}
# on <target>, each a
# path relative to the directory the host executable runs from.
function(orch_add_layout_definitions target)
  cmake_parse_arguments(L "" "HOST;WORKER;WORKER_LIBRARY" "" ${ARGN})
  # Installed: both executables in bin/; the rest relative between two directories of one
  # prefix, so the prefix itself drops out (an absolute CMAKE_INSTALL_LIBDIR stays absolute, and
  # such an installation cannot be moved).
  foreach(dir BINDIR PLUGIN_DIR NODE_DIR WORKER_LIBRARY_DIR PYTHON_DIR FRONTEND_DIR TEMPLATES_DIR)
    if(dir STREQUAL "BINDIR")
      set(path "${CMAKE_INSTALL_BINDIR}")
    else()
      set(path "${ORCH_INSTALL_${dir}}")
    endif()
    cmake_path(ABSOLUTE_PATH path BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}" NORMALIZE
      OUTPUT_VARIABLE full_${dir})
  endforeach()
  file(RELATIVE_PATH installed_plugins "${full_BINDIR}" "${full_PLUGIN_DIR}")
  file(RELATIVE_PATH installed_nodes "${full_BINDIR}" "${full_NODE_DIR}")
  file(RELATIVE_PATH installed_worker_library "${full_BINDIR}" "${full_WORKER_LIBRARY_DIR}")
  file(RELATIVE_PATH installed_python "${full_BINDIR}" "${full_PYTHON_DIR}")
  file(RELATIVE_PATH installed_frontend "${full_BINDIR}" "${full_FRONTEND_DIR}")
  file(RELATIVE_PATH installed_templates "${full_BINDIR}" "${full_TEMPLATES_DIR}")
  # Build tree: from where the host is linked to where the worker, plugins and packs are.
  set(host_dir "$<TARGET_FILE_DIR:${L_HOST}>")
  target_compile_definitions(${target} PRIVATE
    ORCH_LAYOUT_INSTALLED_WORKER="$<TARGET_FILE_NAME:${L_WORKER}>"
    ORCH_LAYOUT_INSTALLED_PLUGINS="${installed_plugins}"
    ORCH_LAYOUT_INSTALLED_NODES="${installed_nodes}"
    ORCH_LAYOUT_INSTALLED_WORKER_LIBRARY="${installed_worker_library}/$<TARGET_FILE_NAME:${L_WORKER_LIBRARY}>"
    ORCH_LAYOUT_INSTALLED_PYTHON="${installed_python}"
    ORCH_LAYOUT_INSTALLED_FRONTEND="${installed_frontend}"
    ORCH_LAYOUT_INSTALLED_TEMPLATES="${installed_templates}"
    ORCH_LAYOUT_BUILD_WORKER="$<PATH:RELATIVE_PATH,$<TARGET_FILE:${L_WORKER}>,${host_dir}>"
    ORCH_LAYOUT_BUILD_PLUGINS="$<PATH:RELATIVE_PATH,${ORCH_PLUGIN_DIR},${host_dir}>"
    ORCH_LAYOUT_BUILD_NODES="$<PATH:RELATIVE_PATH,${ORCH_NODE_LIBRARY_DIR},${host_dir}>"
    ORCH_LAYOUT_BUILD_WORKER_LIBRARY="$<PATH:RELATIVE_PATH,$<TARGET_FILE:${L_WORKER_LIBRARY}>,${host_dir}>"
    # The comfy_orch package is pure Python: the build tree uses the source's copy.
    ORCH_LAYOUT_BUILD_PYTHON="$<PATH:RELATIVE_PATH,${PROJECT_SOURCE_DIR}/python,${host_dir}>"
    ORCH_LAYOUT_BUILD_FRONTEND="$<PATH:RELATIVE_PATH,${ORCH_FRONTEND_DIR},${host_dir}>"
    ORCH_LAYOUT_BUILD_TEMPLATES="$<PATH:RELATIVE_PATH,${ORCH_TEMPLATES_DIR},${host_dir}>")
endfunction()
