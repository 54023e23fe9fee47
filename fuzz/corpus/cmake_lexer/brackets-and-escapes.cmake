#[[ A bracket comment
    over two lines ]]
message(STATUS [=[a [[nested]] bracket]=] "quoted \"escapes\" \${not_a_var} ;" unquoted\ with\ spaces)
set(FLAGS -DNAME="a b" -Wall) #[==[ trailing ]==]
if((WIN32 OR APPLE) AND NOT ("${X}" STREQUAL ""))
  target_compile_definitions(lib PRIVATE "MSG=\"hi\"")
endif()
string(REGEX REPLACE "([^;]+)" "\\1" OUT "${IN}")
