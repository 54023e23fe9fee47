function(add_model_library name)
  add_library(${name} STATIC ${ARGN})
  target_link_libraries(${name}
    PUBLIC
      torch
    PRIVATE
      fmt::fmt
  )
endfunction()

foreach(exp IN ITEMS baseline wide deep)
  add_executable(train_${exp} train.cpp)
  target_compile_definitions(train_${exp} PRIVATE EXPERIMENT=${exp})
  target_link_libraries(train_${exp} PRIVATE models ${TORCH_LIBRARIES})
endforeach()
MACRO(Legacy_Macro)
  ADD_DEFINITIONS(-DLEGACY)
ENDMACRO(Legacy_Macro)
