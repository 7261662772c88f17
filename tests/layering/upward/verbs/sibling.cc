// Fixture of tests/layering: an include of a layer of the same rank (never compiled).
#include "common/result.h"
#include "observe/publisher.h"
