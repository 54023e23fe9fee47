add_executable(broken main.cpp
set(X "never closed)
