// Code HotSpot rewrites in place while it runs (issue 32): call sites whose inline caches go from
// one receiver class to several (patched, their holders freed), string constants compiled into the
// code that young collections move (-XX:+UseSerialGC -Xmn4m: the oops in the code are rewritten),
// methods compiled, made not entrant and compiled again. The output is a checksum known natively.
//   java -XX:+UseSerialGC -Xmn4m -cp DIR JitPatches ROUNDS
public class JitPatches {
    interface Shape { long area(long k); }
    static final class Square implements Shape { public long area(long k) { return k * k; } }
    static final class Line implements Shape { public long area(long k) { return k + 7; } }
    static final class Tri implements Shape { public long area(long k) { return k * (k + 1) / 2; } }
    static final class Dot implements Shape { public long area(long k) { return 1; } }

    static long calls(Shape[] shapes, int kinds, int n) {
        long s = 0;
        for (int i = 0; i < n; i++)
            s += shapes[i % kinds].area(i & 1023);
        return s;
    }

    static long strings(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            String t = "phase-" + (i % 97);  // a constant in the compiled code, moved by each young GC
            s = s * 31 + t.length() + "scope".hashCode() + t.split("-")[1].length();
            byte[] garbage = new byte[256];  // young collections often
            s += garbage.length;
        }
        return s;
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        Shape[] shapes = { new Square(), new Line(), new Tri(), new Dot() };
        long sum = 0;
        for (int r = 0; r < rounds; r++) {
            for (int kinds = 1; kinds <= 4; kinds++)  // monomorphic, bimorphic, megamorphic
                sum = sum * 17 + calls(shapes, kinds, 20000);
            sum = sum * 13 + strings(20000);
        }
        System.out.println("checksum " + sum);
    }
}
