// No LibTorch needed: the progress display does not depend on findings.
int first() { return 1; }
