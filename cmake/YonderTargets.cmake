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

# yonder_library(NAME SOURCES ... DEPS ...): one static library per src/ folder.
# DEPS is the explicit list of what the folder may use (see its README).
function(yonder_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(yonder_${name} STATIC ${ARG_SOURCES})
  add_library(yonder::${name} ALIAS yonder_${name})
  target_include_directories(yonder_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(yonder_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  yonder_warnings(yonder_${name})
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
