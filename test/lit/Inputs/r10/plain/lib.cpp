int untouched() { return 1; }
