#include <cstdio>

void part(int step) { std::printf("part %d\n", step); }
