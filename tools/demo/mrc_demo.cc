// Placeholder for the demo (a transfer over the simulated network); replaced by the real one.
#include <cstdio>

int main() {
  std::fprintf(stderr, "mrc-demo: not built yet\n");
  return 1;
}
