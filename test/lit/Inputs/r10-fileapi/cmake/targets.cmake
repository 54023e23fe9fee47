# Included by the top CMakeLists.txt: a target of its own, and the project's
# function that makes training executables.
add_executable(included included/main.cpp)

function(add_training_exe name source)
  add_executable(${name} ${source})
  target_compile_features(${name} PRIVATE cxx_std_17)
endfunction()
