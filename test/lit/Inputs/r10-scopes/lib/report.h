void report(int step);
