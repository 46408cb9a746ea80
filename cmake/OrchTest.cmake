# orch_add_test(NAME <n> SOURCES ... [LIBS ...] [LABELS ...] [ENVIRONMENT VAR=value ...] [RUN_SERIAL])
# One GoogleTest executable per area (RMM's ConfigureTest). Tests are discovered at build time
# so `ctest -L <label>` selects them. RUN_SERIAL is for suites that assert on machine-wide state
# (no new /dev/shm entry while they ran), which only means something when nothing else runs.
include(GoogleTest)
function(orch_add_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME" "SOURCES;LIBS;LABELS;ENVIRONMENT" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE GTest::gtest GTest::gtest_main GTest::gmock ${T_LIBS})
  target_compile_features(${T_NAME} PRIVATE cxx_std_20)
  orch_set_warnings(${T_NAME})
  # The tests' own code at -O1 in the default preset: it compiles a quarter faster, and what it
  # tests (the libraries, workers and plugins it links and runs) stays at -O2.
  target_compile_options(${T_NAME} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O1>)
  target_compile_definitions(${T_NAME} PRIVATE
    ORCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ORCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # gtest_discover_tests flattens PROPERTIES into key/value pairs, so a list of labels must
  # travel with its separators escaped or it would swallow the keys after it.
  string(REPLACE ";" "\\;" labels "${T_LABELS}")
  string(REPLACE ";" "\\;" environment "${T_ENVIRONMENT}")
  set(serial FALSE)
  if(T_RUN_SERIAL)
    set(serial TRUE)
  endif()
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${labels}" TIMEOUT 300 RUN_SERIAL ${serial} ENVIRONMENT "${environment}")
endfunction()
