int tool_b() { return 2; }
