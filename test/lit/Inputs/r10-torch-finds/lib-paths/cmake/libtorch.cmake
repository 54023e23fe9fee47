# LibTorch by its library paths: no imported target, so CMake's backtraces
# of the executables never reach TorchConfig.cmake.
find_package(Torch REQUIRED)

function(add_trainer name)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${TORCH_INCLUDE_DIRS})
  target_link_libraries(${name} PRIVATE ${TORCH_LIBRARY} ${C10_LIBRARY})
endfunction()
