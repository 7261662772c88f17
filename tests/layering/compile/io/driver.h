// Fixture of tests/layering (compile_layers): a downward include, which compiles.
#pragma once
#include "engine/ok.h"
struct Driver {
  Ok ok;
};
