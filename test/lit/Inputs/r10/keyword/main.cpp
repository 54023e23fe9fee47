int helper();

int main() { return helper(); }
