/* A library that exports what CPython exports, with nothing of CPython behind it: _PyRuntime, the
 * type objects, and a Py_Version no CPython has. */
#define EXPORTED __attribute__((visibility("default")))
EXPORTED char _PyRuntime[4096];
EXPORTED char PyCode_Type[512];
EXPORTED char PyUnicode_Type[512];
EXPORTED char PyBytes_Type[512];
EXPORTED const unsigned long Py_Version = 0x0963a0f1UL;
