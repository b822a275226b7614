#!/bin/bash
# Ctrl-C typed in a real terminal (tmux) at a random moment 0.40-0.79 s into
# `phasescope --no-dashboard --mode MODE -f intcount` (a loop that counts its SIGINTs), TRIES times:
# how each try ended (stop 47, docs/robustness.md). "sigints 1": the program got the Ctrl-C once;
# "interrupted": it came before the spawn (nothing started); "killed by SIGTERM": it was lost.
#     bash bench/ctrl_c_spawn.sh [TRIES=30] [MODE=sampled]
# Run from the repository with phasescope installed in .venv; uses its own tmux socket.
set -u
tries=${1:-30}; mode=${2:-sampled}
root=$(cd "$(dirname "$0")/.." && pwd); dir=$(mktemp -d); S="tmux -L ctrl-c-spawn-$$"
cat > "$dir/intcount.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static volatile sig_atomic_t n;
static void on_int(int s) { (void)s; n++; }
volatile unsigned long sink;
int main(void) {
    struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = on_int; sigaction(SIGINT, &sa, 0);
    for (long i = 0; i < 4000000000L && n == 0; i++) sink += i;  /* until the first SIGINT */
    usleep(300000);                                                /* a second one would land here */
    printf("sigints %d\n", (int)n);
    return 0;
}
C
cc -O1 -o "$dir/intcount" "$dir/intcount.c" || exit 1
for i in $(seq "$tries"); do
    rm -f "$dir/out" "$dir/rc"
    $S new-session -d -x 160 -y 50 -s t "bash --norc" 2>/dev/null || { sleep 1; continue; }  # a loaded machine: again
    $S send-keys -t t ". '$root/.venv/bin/activate'; cd '$dir'; phasescope --no-dashboard --mode $mode -f ./intcount > out 2> err; echo RC=\$? > rc" Enter
    sleep "0.$((40 + RANDOM % 40))"; $S send-keys -t t C-c
    for _ in $(seq 120); do [ -s "$dir/rc" ] && break; sleep 0.5; done
    echo "$(cat "$dir/rc") $(cat "$dir/out") :: $(tail -1 "$dir/err" | sed 's/(pid [0-9]*) //')"
    $S kill-server 2>/dev/null
done | sort | uniq -c
rm -rf "$dir"
