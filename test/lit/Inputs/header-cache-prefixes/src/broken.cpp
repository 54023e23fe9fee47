#include <torch/broken.h>

int main() { return 0; }
