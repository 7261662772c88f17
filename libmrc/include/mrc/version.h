// libmrc's version string. Threading: pure function.
#pragma once

#define MRC_LIBRARY_VERSION "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif
/// The library's version, "MAJOR.MINOR.PATCH".
const char* mrc_library_version(void);
#ifdef __cplusplus
}
#endif
