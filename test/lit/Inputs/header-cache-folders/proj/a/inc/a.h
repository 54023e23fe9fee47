#pragma once
inline int helper_a() { return 3; }
