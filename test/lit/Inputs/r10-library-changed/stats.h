#pragma once
#include <cstdio>

inline void report(int step) { std::printf("step %d\n", step); }
void summary(int steps);
