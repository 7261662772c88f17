// Fixture: a public header that leaks an internal one.
#pragma once
#include "engine/internal.h"
