// Fixture of tests/layering (compile_layers): an upward include, a missing file there.
#pragma once
#include "io/driver.h"
inline Driver make_driver() { return {}; }
