# operator_readme_walkthrough: README.md's local-cluster recipe, line by line, in a clean
# environment (readme_walkthrough.sh). Needs the orrery and orrery-core links in build/bin.
add_test(NAME operator_readme_walkthrough
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/readme_walkthrough.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(operator_readme_walkthrough PROPERTIES TIMEOUT 300)
