# The rank-ordered allreduce over NCCL (nccl_allreduce.h), its GPU test and nccl_bench.
# Included from runtime/proxy/CMakeLists.txt inside if(ORRERY_HAVE_CUDA), after orrery_proxy is
# defined: CUDAToolkit is found and orrery_proxy carries the CUDA kernels and cudart. Sources are
# named from this file's folder (CMAKE_CURRENT_LIST_DIR = runtime/proxy/cuda). No return() here:
# in an included file it would return from the includer.
#
# NCCL is not a FindCUDAToolkit component (toolchain.md item 10): found by hand, next to cudart.
# Where it is absent nothing below is defined and the rest of the build goes on.
find_library(ORRERY_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
find_path(ORRERY_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})

# nccl.h is enough for the proxy: it reaches libnccl at run time (nccl_api.h), so orrery-proxy
# starts, and sums on the host, where NCCL is absent. The library is linked only by the GPU test
# and nccl_bench.
if(NOT ORRERY_NCCL_INCLUDE_DIR)
  message(STATUS "orrery: nccl.h not found: orrery-proxy is built without NCCL (jobs across "
                 "GPUs sum on the host), nccl_allreduce_test and nccl_bench are not built")
else()
  set(orrery_nccl_sources ${CMAKE_CURRENT_LIST_DIR}/nccl_api.cc
                          ${CMAKE_CURRENT_LIST_DIR}/nccl_allreduce.cc)
  target_sources(orrery_proxy PRIVATE ${orrery_nccl_sources})
  target_include_directories(orrery_proxy SYSTEM PUBLIC ${ORRERY_NCCL_INCLUDE_DIR})
  target_compile_definitions(orrery_proxy PUBLIC ORRERY_HAVE_NCCL=1)
  target_link_libraries(orrery_proxy PUBLIC ${CMAKE_DL_LIBS})
  # The fake CUDA build (tests/fake_cuda) compiles the same sources over the fake NCCL.
  set_property(GLOBAL APPEND PROPERTY ORRERY_CUDA_BACKEND_SOURCES ${orrery_nccl_sources})
  set_property(GLOBAL PROPERTY ORRERY_NCCL_INCLUDE_DIR ${ORRERY_NCCL_INCLUDE_DIR})
endif()

if(NOT ORRERY_NCCL_LIB OR NOT ORRERY_NCCL_INCLUDE_DIR)
  message(STATUS "orrery: libnccl not found (library: ${ORRERY_NCCL_LIB}, nccl.h: "
                 "${ORRERY_NCCL_INCLUDE_DIR}): nccl_allreduce_test and nccl_bench are not built")
else()
  message(STATUS "orrery: NCCL ${ORRERY_NCCL_LIB}")

  # libnccl.so is linked dynamically (NCCL ships no static library here); it carries its own
  # copy of the CUDA runtime, and shares device pointers and streams with ours through the
  # driver's primary context. The proxy's code finds the same library already loaded.
  add_library(orrery_nccl INTERFACE)
  target_link_libraries(orrery_nccl INTERFACE orrery_proxy ${ORRERY_NCCL_LIB})
  # GPU test (label gpu): bitwise against the host's rank-ordered sum; every test skips, saying
  # so, without a device. The binary must start here for test discovery: BUILD_RPATH finds
  # libnccl.so.2 in the CUDA toolkit's library folder.
  include(GoogleTest)
  add_executable(nccl_allreduce_test ${CMAKE_CURRENT_LIST_DIR}/nccl_allreduce_test.cc)
  target_link_libraries(nccl_allreduce_test PRIVATE orrery_nccl GTest::gtest_main)
  set_target_properties(nccl_allreduce_test PROPERTIES BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
  gtest_discover_tests(nccl_allreduce_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)

  # ncclAllReduce against the rank-ordered allreduce (W = D, W = 2D) on all visible GPUs; prints
  # "no CUDA device: ..." and exits 0 without one. Lands with the other benchmarks.
  add_executable(nccl_bench ${PROJECT_SOURCE_DIR}/bench/nccl_bench.cc)
  target_link_libraries(nccl_bench PRIVATE orrery_nccl)
  set_target_properties(nccl_bench PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench
    BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
endif()
