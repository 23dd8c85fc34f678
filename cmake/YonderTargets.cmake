# Helpers that give every target the same warnings and layout.

set(YONDER_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)

function(yonder_warnings target)
  target_compile_options(${target} PRIVATE ${YONDER_WARNINGS})
  if(YONDER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Unity builds: each library (and each test of several files) compiles its sources in batches of
# YONDER_UNITY_BATCH files per translation unit. On CI's 2 cores most of a
# compile is re-parsing the same Boost.Asio and nlohmann headers, so batching
# cuts the build by about a third. Names in anonymous namespaces must
# therefore be unique within a library; set YONDER_UNITY_BUILD=OFF to check
# a file compiles on its own.
option(YONDER_UNITY_BUILD "Compile each library in batches of source files" ON)
set(YONDER_UNITY_BATCH 8 CACHE STRING "Source files per unity translation unit")

# Precompiled headers: the third-party headers most files include (Boost.Asio,
# nlohmann, spdlog, and GoogleTest in tests) are parsed once per build, not
# once per translation unit. Under clang at -O0 with the sanitizers they cost
# about 5 s of CPU before a file's own code (docs/architecture.md). One PCH
# serves every library and program, a second every test: each target reuses
# it (REUSE_FROM), so it is compiled twice per build, not once per target.
# On by default for clang (the asan and tsan presets); GCC's dev and release
# builds compile without, so they still catch a file that forgets an include.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(yonder_pch_default ON)
else()
  set(yonder_pch_default OFF)
endif()
option(YONDER_PCH "Precompile the common third-party headers (clang builds)" ${yonder_pch_default})
set(YONDER_PCH_HEADERS <algorithm> <chrono> <filesystem> <functional> <map> <memory> <optional>
    <string> <utility> <vector> <nlohmann/json.hpp> <boost/asio/io_context.hpp>
    <boost/asio/post.hpp> <boost/asio/steady_timer.hpp> <spdlog/spdlog.h>)
if(YONDER_PCH AND CCACHE_PROGRAM)
  # ccache passes over a file compiled with a PCH unless told that the PCH's
  # macros and timestamps may be trusted; clang then must leave the
  # timestamps out of the PCH (-fno-pch-timestamp, below).
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime ${CCACHE_PROGRAM})
endif()
if(YONDER_PCH)
  add_library(yonder_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(yonder_pch PRIVATE nlohmann_json::nlohmann_json Boost::headers spdlog::spdlog)
  target_precompile_headers(yonder_pch PRIVATE ${YONDER_PCH_HEADERS})
  add_library(yonder_pch_test STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(yonder_pch_test PRIVATE nlohmann_json::nlohmann_json Boost::headers spdlog::spdlog
    GTest::gtest GTest::gmock)
  target_precompile_headers(yonder_pch_test PRIVATE ${YONDER_PCH_HEADERS} <gtest/gtest.h> <gmock/gmock.h>)
  target_compile_options(yonder_pch PRIVATE -Xclang -fno-pch-timestamp)
  target_compile_options(yonder_pch_test PRIVATE -Xclang -fno-pch-timestamp)
endif()

# yonder_precompiled(TARGET [test]): TARGET compiles with the shared PCH.
function(yonder_precompiled target)
  if(NOT YONDER_PCH)
    return()
  endif()
  if(ARGN STREQUAL "test")
    target_precompile_headers(${target} REUSE_FROM yonder_pch_test)
  else()
    target_precompile_headers(${target} REUSE_FROM yonder_pch)
  endif()
endfunction()

# yonder_library(NAME SOURCES ... DEPS ...): one static library per src/ folder.
# DEPS is the explicit list of what the folder may use (see its README).
function(yonder_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(yonder_${name} STATIC ${ARG_SOURCES})
  add_library(yonder::${name} ALIAS yonder_${name})
  target_include_directories(yonder_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(yonder_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  yonder_warnings(yonder_${name})
  yonder_precompiled(yonder_${name})
  if(YONDER_UNITY_BUILD)
    set_target_properties(yonder_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${YONDER_UNITY_BATCH})
  endif()
endfunction()

# yonder_test(NAME SOURCES ... DEPS ... LABELS ...): a GoogleTest binary
# registered with CTest under its labels (unit, integration, fuzz, bench).
function(yonder_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS;ENV" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  yonder_warnings(${name})
  yonder_precompiled(${name} test)
  list(LENGTH ARG_SOURCES source_count)
  if(YONDER_UNITY_BUILD AND source_count GREATER 1)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${YONDER_UNITY_BATCH})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "YONDER_BUILD_DIR=${PROJECT_BINARY_DIR};YONDER_SOURCE_DIR=${PROJECT_SOURCE_DIR};${ARG_ENV}")
  yonder_test_cost(${name})
endfunction()
