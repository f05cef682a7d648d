// kvpool_python_core: the C++ side of the Python module as one shared library (see
// CMakeLists.txt). Its one own symbol is the version the module reports as __version__.
extern "C" const char* kvpool_version() { return KVPOOL_VERSION; }
