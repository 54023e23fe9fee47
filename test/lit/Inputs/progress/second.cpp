int second() { return 2; }
