// Not listed by any target.
int main() { return 0; }
