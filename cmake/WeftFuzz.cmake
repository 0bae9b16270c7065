# libFuzzer targets. Include this once (the top-level CMakeLists does when WEFT_BUILD_FUZZERS=ON)
# and add targets with
#
#   weft_add_fuzzer(<name> <source> <corpus_dir> [SOURCES <extra sources...>] [LIBS <libraries...>])
#
# <source> defines LLVMFuzzerTestOneInput. The target is compiled with clang's
# -fsanitize=fuzzer plus the build's WEFT_SANITIZE (address,undefined by default), together with
# SOURCES (the library code under test, instrumented for coverage too); without SOURCES it links
# weft_internal. <corpus_dir> is the committed seed corpus (tests/fuzz/corpus/<name>/). Each
# target becomes a ctest test "fuzz_<name>" that fuzzes for WEFT_FUZZ_SECONDS (default 60),
# starting from the seed corpus and writing new inputs to <build>/fuzz-corpus/<name>/ (never to
# the source tree). Crash inputs land in <build>/fuzz-artifacts/.
include_guard(GLOBAL)

set(WEFT_FUZZ_SECONDS 60 CACHE STRING "Seconds each fuzz_* ctest test fuzzes for")
set(WEFT_CAN_FUZZ OFF)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(WEFT_CAN_FUZZ ON)
else()
  message(WARNING "WEFT_BUILD_FUZZERS=ON needs clang++ (configure with CXX=clang++); fuzz targets are skipped")
endif()

function(weft_add_fuzzer name source corpus_dir)
  if(NOT WEFT_CAN_FUZZ)
    return()
  endif()
  cmake_parse_arguments(F "" "" "SOURCES;LIBS" ${ARGN})
  set(san "fuzzer")
  if(WEFT_SANITIZE)
    string(APPEND san ",${WEFT_SANITIZE}")
  else()
    string(APPEND san ",address,undefined")
  endif()
  add_executable(${name} ${source} ${F_SOURCES})
  target_compile_options(${name} PRIVATE -fsanitize=${san} -fno-omit-frame-pointer -g ${WEFT_WARNINGS})
  target_link_options(${name} PRIVATE -fsanitize=${san})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include
                                             ${PROJECT_BINARY_DIR}/generated)
  if(F_SOURCES)
    target_link_libraries(${name} PRIVATE weft_deps ${F_LIBS})
  else()
    target_link_libraries(${name} PRIVATE weft_internal ${F_LIBS})
  endif()
  set(work ${PROJECT_BINARY_DIR}/fuzz-corpus/${name})
  set(artifacts ${PROJECT_BINARY_DIR}/fuzz-artifacts/)
  file(MAKE_DIRECTORY ${work} ${artifacts})
  add_test(NAME fuzz_${name}
           COMMAND ${name} -max_total_time=${WEFT_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                   -artifact_prefix=${artifacts} ${work} ${corpus_dir})
  set_tests_properties(fuzz_${name} PROPERTIES TIMEOUT 300 LABELS fuzz)
endfunction()
