# The node's device side (NodeRuntime, runtime/node/job_runner.h): proxies and worker processes.
# Included from runtime/CMakeLists.txt; the agent's own targets live beside it.
include(GoogleTest)
add_library(orrery_node_runtime STATIC ${CMAKE_CURRENT_LIST_DIR}/node_runtime.cc)
target_link_libraries(orrery_node_runtime PUBLIC orrery_proxy)

# Device-side end-to-end tests: real orrery-proxy and orrery-train-mlp processes.
add_executable(device_runtime_test ${CMAKE_CURRENT_LIST_DIR}/../proxy/device_runtime_test.cc)
target_link_libraries(device_runtime_test PRIVATE orrery_node_runtime orrery_workloads
                      GTest::gtest_main)
target_compile_definitions(device_runtime_test PRIVATE
  ORRERY_BIN_DIR="$<TARGET_FILE_DIR:orrery-proxy>"
  ORRERY_MLP_BIN="$<TARGET_FILE:orrery-train-mlp>")
add_dependencies(device_runtime_test orrery-proxy orrery-train-mlp)
gtest_discover_tests(device_runtime_test DISCOVERY_TIMEOUT 60)
if(ORRERY_HAVE_CUDA)
  # The same tests on the cuda backend (label gpu); without a GPU each prints why and exits 77,
  # which ctest shows as Skipped.
  gtest_discover_tests(device_runtime_test DISCOVERY_TIMEOUT 60 TEST_PREFIX "cuda."
                       PROPERTIES ENVIRONMENT ORRERY_TEST_BACKEND=cuda LABELS gpu
                                  SKIP_RETURN_CODE 77)
endif()
