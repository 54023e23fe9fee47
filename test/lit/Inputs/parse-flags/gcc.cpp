// Compiled with options only GCC knows.
int main() { return 0; }
