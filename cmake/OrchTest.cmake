# orch_add_test(NAME <n> SOURCES ... [LIBS ...] [LABELS ...])
# One GoogleTest executable per area (RMM's ConfigureTest). Tests are discovered at build time
# so ctest -L <label> selects them; the corpus location reaches tests as ORCH_SHARED_DIR.
function(orch_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest GTest::gtest_main GTest::gmock ${T_LIBS})
  orch_set_warnings(${T_NAME})
  target_compile_definitions(${T_NAME} PRIVATE
    ORCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ORCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
  include(GoogleTest)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT 300)
endfunction()
