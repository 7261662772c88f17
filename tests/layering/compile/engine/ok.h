// Fixture of tests/layering (compile_layers): the lowest header here.
#pragma once
struct Ok {};
