cmake_minimum_required(VERSION 3.18 FATAL_ERROR)
project(trainer LANGUAGES CXX)

# LibTorch from a download; the user's own prefix hides the cache's.
set(CMAKE_PREFIX_PATH /opt/libtorch)
find_package(Torch REQUIRED)
set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")

add_executable(train
  src/main.cpp   # the loop
  src/data.cpp
)
target_link_libraries(train "${TORCH_LIBRARIES}")
set_property(TARGET train PROPERTY CXX_STANDARD 17)
