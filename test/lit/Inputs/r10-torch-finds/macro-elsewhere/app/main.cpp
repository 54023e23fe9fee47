int main(int argc, char **argv) { return argc > 1 && argv[1] ? 1 : 0; }

// Training lives in a unit not parsed here.
void train_elsewhere();
void run_training() { train_elsewhere(); }
