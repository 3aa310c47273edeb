# operator_cluster_<scenario>: the real daemons started by hand, faults injected, operator actions
# (operator_cluster_test.sh says what each scenario does).
foreach(_scenario faults own-failure duplicate on-demand admission)
  string(REPLACE "-" "_" _name "${_scenario}")
  add_test(NAME operator_cluster_${_name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/operator_cluster_test.sh $<TARGET_FILE:orrery>
                   $<TARGET_FILE:orrery-core> $<TARGET_FILE:orrery-node>
                   $<TARGET_FILE:orrery-train-mlp> ${_scenario})
  set_tests_properties(operator_cluster_${_name} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
endforeach()
