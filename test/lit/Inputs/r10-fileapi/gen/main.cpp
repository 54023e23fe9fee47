int main() { return 0; }

// Training lives in a unit not parsed here: the program may train (one
// that trains nothing is left as it is).
void train_elsewhere();
void run_training() { train_elsewhere(); }
