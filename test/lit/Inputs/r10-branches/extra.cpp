int extra_helper() { return 1; }
