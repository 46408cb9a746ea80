# `cmake --install <build> [--prefix <dir>]`: everything under one prefix, in the layout of
# cmake/InstallLayout.cmake (docs/deployment.md "Install and relocation"):
#   bin/                        comfy-orch, comfy-orch-worker
#   lib/comfy-orch/plugins/     orch-*.so (the backend, pager, ledger and allocator plugins)
#   lib/comfy-orch/nodes/       the example packs' node libraries
#   lib/comfy-orch/liborch_worker.so  the worker runtime's C API (Python workers load it)
#   lib/comfy-orch/liborch_host.so    the host runtime's C API (ComfyUI as the host loads it)
#   share/comfy-orch/python/    the comfy_orch Python package (pure Python) and pyproject.toml
#   include/orch/plugin/*.h     the plugin ABI
#   include/orch/worker/nodes.h the node ABI
#   lib/cmake/comfy_orch/       find_package(comfy_orch): comfy_orch::plugin_abi, ::node_abi
#   share/comfy-orch/examples/  the example deployments, packs and prompts
#   share/doc/comfy-orch/       README.md and docs/
# Nothing installed names the build tree or the prefix: the host finds its files from where it
# runs (orchestrator/process/src/install_layout.cpp), and the CMake package from where it was found.
include(CMakePackageConfigHelpers)

install(TARGETS comfy-orch comfy-orch-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS orch_worker_shared orch_host_shared
  LIBRARY DESTINATION ${ORCH_INSTALL_WORKER_LIBRARY_DIR})
# The frontend, where scripts/install-deps unpacked it (serve answers / with a page saying how
# to get it otherwise).
install(DIRECTORY ${ORCH_FRONTEND_DIR}/ DESTINATION ${ORCH_INSTALL_FRONTEND_DIR} OPTIONAL)
# The workflow templates likewise (serve answers 404 under /templates/ otherwise), without the
# list of wheels install-deps keeps beside them.
install(DIRECTORY ${ORCH_TEMPLATES_DIR}/ DESTINATION ${ORCH_INSTALL_TEMPLATES_DIR} OPTIONAL
  PATTERN .wheels EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ DESTINATION ${ORCH_INSTALL_PYTHON_DIR}
  PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)

# The level-restricted sim pagers exist for the runtime's protocol-injection tests only.
set(_orch_installed_plugins ${ORCH_ALL_PLUGINS})
list(REMOVE_ITEM _orch_installed_plugins orch_pager_sim_l2 orch_pager_sim_l3l4)
install(TARGETS ${_orch_installed_plugins} LIBRARY DESTINATION ${ORCH_INSTALL_PLUGIN_DIR})

if(ORCH_EXAMPLE_PACKS)
  install(TARGETS ${ORCH_EXAMPLE_PACKS} LIBRARY DESTINATION ${ORCH_INSTALL_NODE_DIR})
  install(FILES ${PROJECT_SOURCE_DIR}/examples/sim-deployment.toml
    ${PROJECT_SOURCE_DIR}/examples/sim-pressure-deployment.toml
    DESTINATION ${ORCH_INSTALL_EXAMPLES_DIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/packs ${PROJECT_SOURCE_DIR}/examples/custom_nodes
    ${PROJECT_SOURCE_DIR}/examples/prompts ${PROJECT_SOURCE_DIR}/examples/nodes
    DESTINATION ${ORCH_INSTALL_EXAMPLES_DIR})
endif()

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md")

# The two C ABIs, as header-only targets: what a native pack or a third-party plugin builds
# against. The same names exist in the build tree, for a project that adds this one as a
# subdirectory.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/plugins/include/orch/plugin
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/orch FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/worker/include/orch/worker/nodes.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/orch/worker)
set_target_properties(orch_plugin_abi PROPERTIES EXPORT_NAME plugin_abi)
set_target_properties(orch_node_abi PROPERTIES EXPORT_NAME node_abi)
add_library(comfy_orch::plugin_abi ALIAS orch_plugin_abi)
add_library(comfy_orch::node_abi ALIAS orch_node_abi)
install(TARGETS orch_plugin_abi orch_node_abi EXPORT comfy_orch_targets)
install(EXPORT comfy_orch_targets NAMESPACE comfy_orch:: FILE comfy_orchTargets.cmake
  DESTINATION ${ORCH_INSTALL_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/comfy_orchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/comfy_orchConfig.cmake
  INSTALL_DESTINATION ${ORCH_INSTALL_CMAKE_DIR}
  PATH_VARS ORCH_INSTALL_PLUGIN_DIR ORCH_INSTALL_NODE_DIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/comfy_orchConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/comfy_orchConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/comfy_orchConfigVersion.cmake DESTINATION ${ORCH_INSTALL_CMAKE_DIR})
