// A long JIT-runtime program of fixed work, for paired timings of sampled mode (farm-bench): the
// activities of bench/truth/nodework.js, each run a fixed number of times in a fixed cycle (its
// CPU time, unlike the truth workload's budget, grows with any cost a tracer adds).
//   node jit_cost.js [ROUNDS]
"use strict";
const crypto = require("crypto");
const words = Array.from({ length: 40000 }, (_, i) => "w" + ((i * 7919) % 100003).toString(36));
const text = words.join(" ");
const doc = JSON.stringify({ rows: words.slice(0, 4000).map((w, i) => ({ id: i, name: w, tags: [w, i % 7], v: i / 3 })) });
const data = Buffer.from(text);
const work = [
  () => JSON.stringify(JSON.parse(doc)).length,
  () => (text.match(/\bw([a-z]+)(\d)[a-z]*\b/g) || []).length,
  () => { const m = new Map(); for (const w of words) m.set(w, (m.get(w) || 0) + 1); return m.size; },
  () => { const a = new Float64Array(50000); for (let i = 0; i < a.length; i++) a[i] = Math.sin(i) * Math.sqrt(i); let t = 0; for (const x of a) t += x; return t; },
  () => crypto.createHash("sha256").update(data).digest().length,
];
let t = 0;
for (let r = 0; r < Number(process.argv[2] || 40); r++) for (const f of work) for (let i = 0; i < 30; i++) t += Number(f()) | 0;
console.log(t);
