// Fixture of tests/layering (public_headers): a private header, not on the public path.
#pragma once
struct Internal {};
