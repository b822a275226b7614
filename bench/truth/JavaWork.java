// A JVM workload whose activities are known by construction, for bench/truth/ (issue 32): each
// activity runs Java code the JIT compiles (integer hashing, floating-point sweeps, sorting, string
// building, hash maps) or an intrinsic (SHA-256) on a worker thread for a budget of its CPU time
// (/proc/thread-self/stat, 10 ms ticks, as nodework.js), in a random order or a fixed cycle; writes
// {"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"} lines to the truth file (that CPU
// time, and the wall clock): the CPU reading counts the kernel's ticks of user and system time, not
// the sampled windows' clock, so truth_score.place_truth puts the wall-clock stamps on the windows'
// clock instead, as for nodework.js. Same arguments as nodework.js:
//   java -cp DIR JavaWork TRUTH ACTIVITIES(comma) random|cycle SECONDS SEED
import java.io.FileWriter;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HashMap;

public class JavaWork {
    static long seed;
    static double rand() { seed = (seed * 1103515245L + 12345L) & 0xffffffffL; return seed / 4294967296.0; }
    static long sink;

    // The calling thread's CPU time (user + system), in ns. Not ThreadMXBean: under exact mode its
    // first use failed (IllegalAccessError linking a method handle in java.management, issue 32).
    static long cpuNs() throws Exception {
        String[] f = new String(Files.readAllBytes(Paths.get("/proc/thread-self/stat"))).split("\\) ")[1].split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L;
    }

    // The wall clock (CLOCK_REALTIME, as the log's window stamps), in ns.
    static long wallNs() {
        java.time.Instant t = java.time.Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static final int[] numbers = new int[200000];
    static final double[] vec = new double[4096];
    static final String[] words = new String[20000];
    static final byte[] data = new byte[1 << 20];

    static long work(String name) throws Exception {
        switch (name) {
            case "ints": { long h = sink; for (long i = 0; i < 2_000_000; i++) h = h * 6364136223846793005L + (i ^ (h >>> 17)); return h; }
            case "floats": { double s = 0; for (int k = 0; k < 50; k++) for (int i = 0; i < vec.length; i++) { vec[i] = vec[i] * 0.5 + Math.sqrt(i + s); s += vec[i] * 1e-9; } return (long) s; }
            case "sort": { int[] a = numbers.clone(); Arrays.sort(a); return a[a.length / 2]; }
            case "strings": { StringBuilder b = new StringBuilder(); for (int i = 0; i < 20000; i++) b.append(words[i].toUpperCase()).append(','); return b.toString().hashCode(); }
            case "map": { HashMap<String, Integer> m = new HashMap<>(); for (String w : words) m.merge(w, 1, Integer::sum); return m.size(); }
            case "sha": { return MessageDigest.getInstance("SHA-256").digest(data)[0]; }
            default: throw new IllegalArgumentException("unknown activity " + name);
        }
    }

    // On a thread of its own, not the JVM's main thread: the work on main crashed under exact mode,
    // and under bare Stalker with the same handling, 4 runs of 4 (docs/exact-mode.md, issue 32).
    // -Djavawork.main=true keeps it on main: the reproducer of that crash (a stale inline cache).
    public static void main(String[] args) throws Exception {
        if (Boolean.getBoolean("javawork.main")) {
            run(args);
            return;
        }
        int[] failed = {0};
        Thread worker = new Thread(() -> {
            try {
                run(args);
            } catch (Throwable e) {
                e.printStackTrace();
                failed[0] = 1;
            }
        });
        worker.start();
        worker.join();
        if (failed[0] != 0) System.exit(1);
    }

    static void run(String[] args) throws Exception {
        String[] names = args[1].split(",");
        boolean cycle = args[2].equals("cycle");
        double seconds = Double.parseDouble(args[3]);
        seed = Long.parseLong(args[4]) & 0xffffffffL;
        for (int i = 0; i < numbers.length; i++) numbers[i] = (int) (rand() * Integer.MAX_VALUE);
        for (int i = 0; i < words.length; i++) words[i] = "w" + Integer.toString((i * 7919) % 100003, 36);
        for (int i = 0; i < data.length; i++) data[i] = (byte) (i * 31 + (i >> 8));
        HashMap<String, Double> budget = new HashMap<>();
        for (String n : names) budget.put(n, 0.6 + rand() * 2.4);
        try (FileWriter out = new FileWriter(args[0])) {
            long start = cpuNs();
            String last = "";
            for (int i = 0; cpuNs() - start < seconds * 1e9; i++) {
                String name;
                double b;
                if (cycle) {
                    name = names[i % names.length];
                    b = budget.get(name);
                } else {
                    final String prev = last;
                    String[] c = Arrays.stream(names).filter(n -> !n.equals(prev)).toArray(String[]::new);
                    name = c[(int) (rand() * c.length)];
                    b = 0.6 + rand() * 2.4;
                }
                long t0 = cpuNs(), w0 = wallNs();
                while (cpuNs() - t0 < b * 1e9) sink += work(name);
                out.write("{\"activity\": \"" + name + "\", \"start_ns\": " + t0 + ", \"end_ns\": "
                          + cpuNs() + ", \"start_wall_ns\": " + w0 + ", \"end_wall_ns\": " + wallNs() + "}\n");
                last = name;
            }
        }
        System.out.println("done " + (sink & 0xff));
    }
}
