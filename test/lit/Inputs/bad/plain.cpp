// No LibTorch at all: nothing to migrate.
int main() { return 0; }
