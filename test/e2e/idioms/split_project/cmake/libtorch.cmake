# LibTorch for the whole project.
find_package(Torch REQUIRED)
set(CMAKE_CXX_STANDARD 17)
