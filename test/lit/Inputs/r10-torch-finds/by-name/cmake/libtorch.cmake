# Where the project finds LibTorch, and how it makes its executables.
find_package(Torch REQUIRED)

function(add_trainer name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE "${TORCH_LIBRARIES}")
  set_property(TARGET ${name} PROPERTY CXX_STANDARD 17)
endfunction()
