int untouched() { return 2; }
