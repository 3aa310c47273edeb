# The CLI's part of the operator's day (issue 19, items 6 and 7): tests/operator/cli_test.sh against
# the real `orrery` and `orrery-core` (docs/runtime.md, "The orrery CLI"). Each case takes seconds.
foreach(_case deadline watch messages restart)
  add_test(NAME operator_cli_${_case}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/cli_test.sh ${_case} $<TARGET_FILE:orrery> $<TARGET_FILE:orrery-core>)
  set_tests_properties(operator_cli_${_case} PROPERTIES TIMEOUT 60)
endforeach()
