# Every dependency is a Debian 12 package (scripts/install-deps installs them) found by
# find_package; nothing is downloaded at configure or build time.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(tomlplusplus 3 REQUIRED)
find_package(spdlog 1.10 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 2 REQUIRED)
# The gateway's state across a restart (orchestrator/gateway/src/gateway_state.cpp).
find_package(SQLite3 REQUIRED)
# serve's image codec (orchestrator/serve/include/orch/serve/image_codec.hpp): libpng,
# libjpeg-turbo and libwebp (with its demuxer, for animated files and ICC profiles), and zlib for
# PNG text chunks. libwebp ships no CMake package, so the four are found through pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ORCH_IMAGE_LIBRARIES REQUIRED IMPORTED_TARGET
  libpng16 libjpeg libwebp libwebpdemux zlib)
if(ORCH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ORCH_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# Optional GPU toolkits: their headers give types only; the drivers are dlopen'ed at run time,
# so a CPU-only machine builds and runs everything else.
# CUDA's: the toolkit where it is installed, else CUDA 13's headers from NVIDIA's header wheels,
# which scripts/install-deps unpacks into .deps/cuda/include (docs/gpu.md).
find_path(ORCH_CUDA_INCLUDE_DIR cuda.h
  HINTS ENV CUDA_PATH /usr/local/cuda/include /usr/local/cuda-13.0/include /usr/include
  PATHS ${PROJECT_SOURCE_DIR}/.deps/cuda/include)
find_path(ORCH_HIP_INCLUDE_DIR hip/hip_runtime_api.h HINTS /opt/rocm/include /usr/include)
set(ORCH_HAVE_CUDA_HEADERS OFF)
if(ORCH_CUDA_INCLUDE_DIR)
  set(ORCH_HAVE_CUDA_HEADERS ON)
endif()
set(ORCH_HAVE_HIP_HEADERS OFF)
if(ORCH_HIP_INCLUDE_DIR)
  set(ORCH_HAVE_HIP_HEADERS ON)
endif()
if(ORCH_HAVE_CUDA_HEADERS)
  file(STRINGS ${ORCH_CUDA_INCLUDE_DIR}/cuda.h _cuda_version REGEX "^#define CUDA_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CUDA_VERSION ([0-9]+).*" "\\1" _cuda_version "${_cuda_version}")
  message(STATUS
    "comfy-orch: CUDA headers: ${ORCH_CUDA_INCLUDE_DIR} (CUDA_VERSION ${_cuda_version})")
else()
  message(STATUS
    "comfy-orch: CUDA headers: none (scripts/install-deps unpacks them): no cuda backend")
endif()
message(STATUS "comfy-orch: HIP headers: ${ORCH_HAVE_HIP_HEADERS}")
