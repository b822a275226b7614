// Activities known by construction: each thread alternates an integer-hash phase and a
// floating-point phase, ROUNDS times each; the JIT compiles both (hot loops).
public class Phases {
    static long ints(long n, long seed) {
        long h = seed;
        for (long i = 0; i < n; i++) h = h * 6364136223846793005L + (i ^ (h >>> 17));
        return h;
    }
    static double floats(int n, double seed) {
        double[] a = new double[1024];
        double s = seed;
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < a.length; i++) { a[i] = a[i] * 0.5 + Math.sqrt(i + s); s += a[i] * 1e-9; }
        }
        return s;
    }
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]), rounds = Integer.parseInt(args[1]);
        long work = Long.parseLong(args[2]);
        long[] out = new long[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                long acc = 0;
                for (int r = 0; r < rounds; r++) {
                    acc += ints(work, id + r);
                    acc += (long) floats((int) (work / 3000), id + r);
                }
                out[id] = acc;
            });
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        long x = 0;
        for (long v : out) x ^= v;
        System.out.println("checksum " + x);
    }
}
