// JIT-hot work on a worker thread (its methods compiled by C1, then C2), then each of the JVM's
// threads as "TID NAME" on stdout (/proc/self/task/*/comm): which of them exact mode followed
// (issue 32: HotSpot's compiler threads are kept native).
//   java -XX:+UseSerialGC -cp DIR TaskNames ROUNDS
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;

public class TaskNames {
    static long mix(long h, long i) { return h * 6364136223846793005L + (i ^ (h >>> 17)); }

    static long round(int n) {
        long h = n;
        for (int i = 0; i < n; i++) h = mix(h, i);
        return h;
    }

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        long[] sink = {0};
        Thread worker = new Thread(() -> { for (int r = 0; r < rounds; r++) sink[0] += round(100_000); });
        worker.start();
        worker.join();
        System.out.println("checksum " + (sink[0] & 0xffff));
        try (Stream<Path> tasks = Files.list(Paths.get("/proc/self/task"))) {
            for (Path t : (Iterable<Path>) tasks::iterator)
                System.out.println(t.getFileName() + " " + new String(Files.readAllBytes(t.resolve("comm"))).trim());
        }
    }
}
