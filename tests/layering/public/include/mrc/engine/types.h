// Fixture of tests/layering (public_headers): a public header that stands alone.
#pragma once
struct Types {};
