// The translation unit that compiles the shared precompiled headers
// (cmake/YonderTargets.cmake, YONDER_PCH): the libraries yonder_pch and
// yonder_pch_test exist only to own them, and nothing links either.
