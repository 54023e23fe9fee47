# Every third-party package of the project.
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/libtorch.cmake)
