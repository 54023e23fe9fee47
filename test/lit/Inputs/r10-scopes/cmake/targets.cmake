# The project's executables, each linked to the library.
macro(add_trainer name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} netlib "${TORCH_LIBRARIES}")
endmacro()

function(add_tool name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE netlib)
endfunction()
