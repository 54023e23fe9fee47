cmake_minimum_required(VERSION 3.14)
project(crlf)
include(cmake/libtorch.cmake)
add_executable(crlf main.cpp)
target_link_libraries(crlf PRIVATE torch) # CRLF
