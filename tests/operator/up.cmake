# `orrery up` as a supervisor (issue 19, item 4; docs/runtime.md, "### orrery up").
#
# operator_up_unit_*: runtime/cli/supervisor_test.cc (the restart backoff rule; real processes
# killed, restarted, stopped) and runtime/cli/ports_test.cc (a busy port named with its holder).
include(GoogleTest)
add_executable(operator_up_unit_test
  ${PROJECT_SOURCE_DIR}/runtime/cli/supervisor_test.cc
  ${PROJECT_SOURCE_DIR}/runtime/cli/ports_test.cc)
target_link_libraries(operator_up_unit_test PRIVATE orrery_cli GTest::gtest_main)
gtest_discover_tests(operator_up_unit_test TEST_PREFIX operator_up_unit_ DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 30)
