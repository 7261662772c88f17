// Fixture: a tool that reaches into the verbs device.
#include "verbs/objects.h"
#include "mrc/verbs/verbs.h"
int main() { return 0; }
