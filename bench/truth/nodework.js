// A JIT-runtime workload whose activities are known by construction, for bench/truth/run.py: each
// activity runs JavaScript that V8 compiles (JSON, regular expressions, sorting, string building,
// Map hashing, typed-array math, BigInt, closures) or a native binding (crypto, zlib) for a budget of
// the main thread's user CPU time (/proc/thread-self/stat, 10 ms ticks), in a random order or a
// fixed cycle; writes {"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"} lines to
// the truth file (that user time, and the wall clock in ms). The ticks' user time is the kernel's
// split of CPU time by ticks and put boundaries up to 2 windows early or late against the sampled
// windows: truth_score.place_truth puts the wall-clock stamps on the windows' clock instead.
//   node nodework.js TRUTH ACTIVITIES(comma) random|cycle SECONDS SEED
"use strict";
const fs = require("fs");
const crypto = require("crypto");
const zlib = require("zlib");
const [truth, acts, order, seconds, seedArg] = process.argv.slice(2);
let seed = Number(seedArg) >>> 0 || 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 4294967296);
const TICK_NS = 1e9 / 100;
const userNs = () => Number(fs.readFileSync("/proc/thread-self/stat", "latin1").split(") ")[1].split(" ")[11]) * TICK_NS;

const words = Array.from({ length: 40000 }, (_, i) => "w" + ((i * 7919) % 100003).toString(36));
const text = words.join(" ");
const doc = JSON.stringify({ rows: words.slice(0, 4000).map((w, i) => ({ id: i, name: w, tags: [w, i % 7], v: i / 3 })) });
const data = Buffer.from(text);
const work = {
  json: () => JSON.stringify(JSON.parse(doc)).length,
  regex: () => (text.match(/\bw([a-z]+)(\d)[a-z]*\b/g) || []).length,
  sort: () => words.slice().sort().length,
  strings: () => { let s = ""; for (let i = 0; i < 20000; i++) s += words[i].toUpperCase() + ","; return s.length; },
  map: () => { const m = new Map(); for (const w of words) m.set(w, (m.get(w) || 0) + 1); return m.size; },
  math: () => { const a = new Float64Array(50000); for (let i = 0; i < a.length; i++) a[i] = Math.sin(i) * Math.sqrt(i); let t = 0; for (const x of a) t += x; return t; },
  bigint: () => { let x = 1n; for (let i = 1n; i < 600n; i++) x = (x * i) % 1000000000000000000000007n; return x; },
  closure: () => { const fs = words.slice(0, 20000).map((w, i) => (k) => k + i + w.length); let t = 0; for (const f of fs) t = f(t) & 0xffff; return t; },
  sha: () => crypto.createHash("sha256").update(data).digest(),
  deflate: () => zlib.deflateSync(data, { level: 6 }).length,
};
const names = acts.split(",");
const budget = Object.fromEntries(names.map((n) => [n, 0.6 + rand() * 2.4]));
const out = fs.openSync(truth, "w");
const start = userNs();
let i = 0, last = "";
while (userNs() - start < Number(seconds) * 1e9) {
  let name, b;
  if (order === "cycle") { name = names[i % names.length]; b = budget[name]; }
  else { const c = names.filter((n) => n !== last); name = c[Math.floor(rand() * c.length)]; b = 0.6 + rand() * 2.4; }
  const t0 = userNs(), w0 = Date.now();
  while (userNs() - t0 < b * 1e9) work[name]();
  fs.writeSync(out, JSON.stringify({ activity: name, start_ns: t0, end_ns: userNs(), start_wall_ns: w0 * 1e6, end_wall_ns: Date.now() * 1e6 }) + "\n");
  last = name; i++;
}
fs.closeSync(out);
