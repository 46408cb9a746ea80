# orch_ipc_add_test(NAME <n> SOURCES ... [LIBS ...] [LABELS ...])
# orch_add_test (cmake/OrchTest.cmake) plus RUN_SERIAL: every ipc test asserts that no new entry
# appeared in /dev/shm while it ran, which only means something if no other test (of another
# component, under `ctest -j`) runs at the same time.
include_guard(GLOBAL)
include(GoogleTest)
function(orch_ipc_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest GTest::gtest_main GTest::gmock ${T_LIBS})
  orch_set_warnings(${T_NAME})
  target_compile_definitions(${T_NAME} PRIVATE
    ORCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ORCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # One label only: gtest_discover_tests flattens PROPERTIES, so "LABELS a;b TIMEOUT 300" would
  # be read as the pairs (LABELS a) (b TIMEOUT) (300 ...) and lose TIMEOUT and RUN_SERIAL.
  list(LENGTH T_LABELS label_count)
  if(label_count GREATER 1)
    message(FATAL_ERROR "orch_ipc_add_test(${T_NAME}): give one label, not ${T_LABELS}")
  endif()
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT 300 RUN_SERIAL TRUE)
endfunction()
