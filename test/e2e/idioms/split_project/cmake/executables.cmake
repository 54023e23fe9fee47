# Every executable of the project links the network library and LibTorch.
macro(add_trainer name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} blobnet "${TORCH_LIBRARIES}")
endmacro()
