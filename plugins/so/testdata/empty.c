/* empty.c — a shared object that is not a collector. */
int not_a_collector(void) { return 0; }
