// libmrc.so's own version query (the OCP API arrives with its own headers).
// Threading: pure function.
#include "mrc/version.h"

extern "C" const char* mrc_library_version(void) { return MRC_LIBRARY_VERSION; }
