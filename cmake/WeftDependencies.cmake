# The one place where Weft finds its dependencies. Every dependency comes from its own packaging.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)       # libucx-dev
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)   # libhwloc-dev
find_package(pugixml REQUIRED)                            # libpugixml-dev
find_package(nlohmann_json 3 REQUIRED)                    # nlohmann-json3-dev
find_package(fmt REQUIRED)                                # libfmt-dev
find_package(CLI11 CONFIG REQUIRED)                       # libcli11-dev
set(WEFT_HAVE_UCX 1)
set(WEFT_HAVE_HWLOC 1)
# The metrics' HTTP endpoint (WEFT_METRICS_PORT); without it only WEFT_METRICS_FILE.
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)     # libcpp-httplib-dev
set(WEFT_HAVE_HTTPLIB 0)
if(HTTPLIB_FOUND)
  set(WEFT_HAVE_HTTPLIB 1)
endif()
find_program(WEFT_PROMTOOL promtool)                       # prometheus (tests of the metrics' format)

set(WEFT_HAVE_MPI 0)
if(WEFT_WITH_MPI)
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(WEFT_HAVE_MPI 1)
  endif()
endif()

set(WEFT_HAVE_CUDA 0)
set(WEFT_HAVE_NCCL 0)
if(WEFT_WITH_NCCL)
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(WEFT_HAVE_CUDA 1)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(WEFT_HAVE_NCCL 1)
    endif()
  endif()
endif()

# weft_deps: what the library links privately (an INTERFACE target, exported so that static
# consumers resolve it).
add_library(weft_deps INTERFACE)
target_link_libraries(weft_deps INTERFACE PkgConfig::UCX PkgConfig::HWLOC pugixml::pugixml
                                          nlohmann_json::nlohmann_json fmt::fmt Threads::Threads)
if(WEFT_HAVE_MPI)
  target_link_libraries(weft_deps INTERFACE MPI::MPI_C)
endif()
if(WEFT_HAVE_HTTPLIB)
  target_link_libraries(weft_deps INTERFACE PkgConfig::HTTPLIB)
endif()
if(WEFT_HAVE_NCCL)
  # Host C++ calling the CUDA runtime and NCCL: no CUDA language needed for the library.
  target_include_directories(weft_deps SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(weft_deps INTERFACE CUDA::cudart ${NCCL_LIBRARY})
endif()
