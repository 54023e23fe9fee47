// Stand-in for LibTorch's c10 macros, which every LibTorch header reaches:
// the header cache finds LibTorch's include folder by it.
#pragma once
#define C10_API
