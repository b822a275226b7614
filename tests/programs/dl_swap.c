/* Loads two libraries in turn, each unloaded before the next is loaded (so the second maps where
 * the first was): dl_swap LIB_A LIB_B ROUNDS N runs LIB_A's work(N), then LIB_B's, ROUNDS times in
 * all. One line per round, with the address its work() had. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: dl_swap LIB_A LIB_B ROUNDS N\n");
        return 2;
    }
    int rounds = atoi(argv[3]);
    unsigned long n = strtoul(argv[4], 0, 10);
    for (int r = 0; r < rounds; r++) {
        void *h = dlopen(argv[1 + (r & 1)], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        unsigned long (*work)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "work");
        printf("round %d at %p: %lu\n", r, (void *)work, work(n));
        fflush(stdout);
        dlclose(h);
    }
    return 0;
}
