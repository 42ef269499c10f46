# The libraries' and tools' common headers, precompiled once and reused by
# every C++ target outside tests/ (which has its own, tests/test_compile.cmake).
# Why: the build is most of the plain test command on CI's 2 cores, and the
# libraries' compile-seconds were most of the build (2026-11-29, this VM:
# 605 of 1,142 compile-seconds in 127 library files; 59 of them include
# Eigen/Dense, which alone takes 3.3 s to parse at -O3).
#
# One header, precompiled by a host target with the flags the library files
# use (a second for position-independent code). A file compiled with other
# flags (a definition the headers below do not read changes nothing) gets
# GCC's -Winvalid-pch warning and parses the headers in full: slower, never
# different. The sanitize preset sets
# YOCO_LIBRARY_PCH=OFF, so that a file that leaves out an include it needs
# still fails to build in CI; clang, which refuses a header precompiled with
# other flags instead of parsing it, builds only there and in build/fuzz.
option(YOCO_LIBRARY_PCH "Precompile the libraries' common headers once and reuse them" ON)

set(YOCO_LIBRARY_PCH_HEADERS
  <Eigen/Dense>
  <algorithm> <array> <cctype> <chrono> <cmath> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
  <fstream> <functional> <iostream> <limits> <map> <memory> <optional> <set> <sstream> <stdexcept>
  <string> <string_view> <utility> <vector>)

# The C++ targets defined in DIR and below (tests/ left out).
function(_yoco_cxx_targets dir out)
  set(found "")
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${t} SOURCES)
    if(sources MATCHES "\\.cpp(;|$)")
      list(APPEND found ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    if(sub MATCHES "/tests$")
      continue()
    endif()
    _yoco_cxx_targets(${sub} more)
    list(APPEND found ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# yoco_library_pch(): called once, after every add_subdirectory. The hosts
# compile as yoco_reference's users do (Eigen, -march=YOCO_CPU_ARCH), without
# linking it: yoco_reference reuses the header too.
function(yoco_library_pch)
  if(NOT YOCO_LIBRARY_PCH)
    return()
  endif()
  _yoco_cxx_targets(${CMAKE_SOURCE_DIR} targets)
  foreach(t IN LISTS targets)
    # Position-independent code (the CUDA libraries) is a flag the header must
    # share: those reuse a second one.
    get_target_property(pic ${t} POSITION_INDEPENDENT_CODE)
    set(host yoco_library_pch)
    if(pic)
      set(host yoco_library_pch_pic)
    endif()
    if(NOT TARGET ${host})
      add_library(${host} OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/pch_host.cpp)
      if(pic)
        set_target_properties(${host} PROPERTIES POSITION_INDEPENDENT_CODE ON)
      endif()
      _yoco_library_pch_flags(${host})
      target_precompile_headers(${host} PRIVATE ${YOCO_LIBRARY_PCH_HEADERS})
    endif()
    target_precompile_headers(${t} REUSE_FROM ${host})
    _yoco_library_pch_flags(${t})
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
  endforeach()
endfunction()

# The flags the header is made with, given to every file that reuses it too:
# Eigen's include path (a file that cannot use the header parses it, Eigen
# included) and yoco_reference's -march.
function(_yoco_library_pch_flags target)
  target_link_libraries(${target} PRIVATE Eigen3::Eigen)
  if(YOCO_CPU_ARCH)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=${YOCO_CPU_ARCH}>)
  endif()
endfunction()
