#pragma once
inline int helper_b() { return 4; }
