# What every trainer program of the project shares: the checkpoint code, and
# the function that makes a trainer executable.
set(TRAINER_SOURCES ${PROJECT_SOURCE_DIR}/train/checkpoint.cpp)

function(add_trainer name)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/train)
  target_link_libraries(${name} PRIVATE shapes_common "${TORCH_LIBRARIES}")
endfunction()
