// Nothing to migrate.
int twice(int x) { return 2 * x; }
