// The object whose precompiled header the tests reuse (test_compile.cmake):
// the header is its content, this file has none.
