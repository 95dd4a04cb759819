# Writes the part of codegen/common/c_prelude.h between the markers "cubecc-host-tested: begin"
# and "cubecc-host-tested: end" to OUTPUT, for test/unit/c_prelude_test.cpp to compile on the
# host. Usage: cmake -DINPUT=c_prelude.h -DOUTPUT=out.inc -P extract-prelude-section.cmake
file(READ "${INPUT}" text)
string(FIND "${text}" "// cubecc-host-tested: begin" begin)
string(FIND "${text}" "// cubecc-host-tested: end" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${INPUT}: no '// cubecc-host-tested: begin' ... 'end' section")
endif()
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${text}" ${begin} ${length} section)
file(WRITE "${OUTPUT}" "${section}")
