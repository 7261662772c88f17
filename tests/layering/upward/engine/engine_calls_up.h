// Fixture of tests/layering: an upward include the check must name (never compiled).
#pragma once
#include "engine/types.h"
#include "mrc/io/udp/udp_driver.h"
