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

# operator_up_<scenario>: real clusters through tests/operator/up_test.sh, each on free ports and
# a data folder of its own (they may run in parallel with anything).
foreach(scenario busy_port start_failure kill_node kill_core data_restart)
  add_test(NAME operator_up_${scenario}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/up_test.sh ${scenario} $<TARGET_FILE:orrery>
                   $<TARGET_FILE:orrery-train-mlp> ${PROJECT_SOURCE_DIR})
  set_tests_properties(operator_up_${scenario} PROPERTIES TIMEOUT 90)
endforeach()
