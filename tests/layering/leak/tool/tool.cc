// Fixture: a tool that reaches into the verbs device.
#include "mrc/verbs/verbs.h"
#include "verbs/objects.h"
int main() { return 0; }
