// The object whose precompiled header the libraries reuse (library_pch.cmake):
// the header is its content, this file has none.
