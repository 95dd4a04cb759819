//===- libcubecc.cpp - libcubecc.so: the layers' static libraries, linked whole --------------===//
//
// A shared library target needs one source of its own; everything libcubecc.so exports comes from
// the layers (see package/CMakeLists.txt).
//
//===-----------------------------------------------------------------------------------------===//
