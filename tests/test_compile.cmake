# How the test files are compiled. The suite's build is most of the plain
# test command on CI's 2 cores (no compiler cache on a fresh clone): at -O3,
# the 62 test files took 562 of the `cuda` preset's 1,310 compile-seconds
# (2026-11-28, a 2-core VM), and a test file's own code runs for seconds
# once built. Two measures cut it to 354 (the build from 11 min 34 s to
# 9 min 37 s; the tests' run time did not grow beyond noise):
#  - The tests' common headers (GoogleTest, Eigen, the standard library) are
#    precompiled once per kind of test (cpu, gpu) and reused by every test of
#    that kind. The sanitize preset sets YOCO_TEST_PCH=OFF, so that a file
#    that leaves out an include it needs still fails to build in CI.
#  - CPU test files compile at -O1 in Release builds. What they lean on at
#    run time (the reference, the harness, the CLI) lives in the libraries,
#    still at -O3. GPU test files keep the preset's -O3: their host-side
#    checks (fp64 LSEs over long rows, the bf16 emulations) run on a lent
#    GPU's metered minutes.
option(YOCO_TEST_PCH "Precompile the tests' common headers once and reuse them" ON)
set(YOCO_TEST_CPU_OPT "-O1" CACHE STRING "Optimisation of the CPU test files in Release builds")

set(YOCO_TEST_PCH_HEADERS
  <gtest/gtest.h> <Eigen/Dense>
  <algorithm> <cmath> <cstdint> <cstdlib> <cstring> <filesystem> <fstream>
  <functional> <limits> <map> <memory> <random> <set> <sstream> <string> <vector>)

# yoco_test_pch_host(KIND USAGE): the target whose precompiled header the
# tests of KIND reuse, built with USAGE (a function applying that kind's
# libraries, include directories and definitions), as the tests are: a
# header precompiled with other flags would be refused by the compiler.
function(yoco_test_pch_host kind usage)
  if(NOT YOCO_TEST_PCH)
    return()
  endif()
  add_library(yoco_test_pch_${kind} OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/pch_host.cpp)
  cmake_language(CALL ${usage} yoco_test_pch_${kind})
  _yoco_test_options(yoco_test_pch_${kind} ${kind})
  target_precompile_headers(yoco_test_pch_${kind} PRIVATE ${YOCO_TEST_PCH_HEADERS})
endfunction()

function(_yoco_test_options target kind)
  if(kind STREQUAL "cpu")
    target_compile_options(${target} PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:${YOCO_TEST_CPU_OPT}>)
  endif()
  if(YOCO_TEST_PCH)
    # A header the compiler cannot use is parsed again in full: say so in the log.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
  endif()
endfunction()

# yoco_test_compile(TARGET KIND): a test of KIND (cpu, gpu) built as above.
function(yoco_test_compile target kind)
  _yoco_test_options(${target} ${kind})
  if(YOCO_TEST_PCH)
    target_precompile_headers(${target} REUSE_FROM yoco_test_pch_${kind})
  endif()
endfunction()
