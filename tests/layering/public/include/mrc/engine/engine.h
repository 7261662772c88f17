// Fixture of tests/layering (public_headers): a public header that includes a private one.
#pragma once
#include "engine/internal.h"
#include "mrc/engine/types.h"
