// Bare Stalker with phasescope's JVM handling and nothing else (issue 32): no counters. Every block
// that ran a popf clears EFLAGS.AC before its end; a fault the program's own handler takes is shown
// to it at the real PC and resumed, still followed, where it decides; threads created after the
// first two are followed 20 ms after they appear. Loaded by bare_stalker.py.
const blocks = []; // [code start, code end, real start] of every compiled block
const retSite = new Map(); // thread -> Stalker's code for its latest plain `ret`
const CLEAR_AC = [0x48, 0x8d, 0x64, 0x24, 0x80, 0x9c, 0x48, 0x81, 0x24, 0x24, 0xff, 0xff, 0xfb, 0xff, 0x9d,
  0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0]; // lea rsp,[rsp-128]; pushf; and [rsp],~AC; popf; lea rsp,[rsp+128]
const UC_RSP = 160, UC_RIP = 168;

function transform(it) {
  let insn, popf = false, start = null, real = null;
  while ((insn = it.next()) !== null) {
    if (start === null) {
      start = it.pc;
      real = insn.address;
    }
    if (insn.mnemonic === 'popfq' || insn.mnemonic === 'popf')
      popf = true;
    if (popf && insn.groups.some(g => g === 'jump' || g === 'call' || g === 'ret')) {
      it.putBytes(CLEAR_AC);
      popf = false;
    }
    if (insn.mnemonic === 'ret' && insn.size === 1)
      retSite.set(Process.getCurrentThreadId(), it.pc);
    it.keep();
  }
  blocks.push([start, it.pc, real]);
}

const bytesAt = (p, n) => Array.from(new Uint8Array(p.readByteArray(n))).join(',');

// The real instruction of compiled code at `pc`: same bytes, as many times earlier in its block.
function realPc(pc) {
  for (let i = blocks.length - 1; i >= 0; i--) {
    const [a, b, r] = blocks[i];
    if (pc.compare(a) < 0 || pc.compare(b) >= 0)
      continue;
    const want = Instruction.parse(pc), key = bytesAt(pc, want.size);
    let k = 0;
    for (let p = a; p.compare(pc) < 0;) {
      const x = Instruction.parse(p);
      if (bytesAt(p, x.size) === key)
        k++;
      p = x.next;
    }
    for (let p = r, n = 0; n < 4096; n++) {
      const x = Instruction.parse(p);
      if (bytesAt(p, x.size) === key && k-- === 0)
        return p;
      p = x.next;
    }
    return null;
  }
  return null;
}

const hooked = new Set();
const sigaction = new NativeFunction(Module.getGlobalExportByName('sigaction'), 'int', ['int', 'pointer', 'pointer']);

function hookHandler(h) {
  if (hooked.has(h.toString()))
    return;
  hooked.add(h.toString());
  Interceptor.attach(h, {
    onEnter(args) {
      this.uc = args[2];
      this.pc = this.uc.add(UC_RIP).readPointer();
      this.real = realPc(this.pc);
      if (this.real !== null)
        this.uc.add(UC_RIP).writePointer(this.real);
    },
    onLeave() {
      if (this.real === null)
        return;
      const resume = this.uc.add(UC_RIP).readPointer();
      if (resume.equals(this.real)) {
        this.uc.add(UC_RIP).writePointer(this.pc);
        return;
      }
      const sp = this.uc.add(UC_RSP).readPointer().sub(8);
      sp.writePointer(resume);
      this.uc.add(UC_RSP).writePointer(sp);
      this.uc.add(UC_RIP).writePointer(retSite.get(Process.getCurrentThreadId()));
    },
  });
}

Process.setExceptionHandler(d => {
  if (d.type === 'access-violation') {
    const sa = Memory.alloc(152);
    sigaction(11, NULL, sa);
    if (sa.readPointer().compare(ptr(1)) > 0)
      hookHandler(sa.readPointer());
  }
  return false;
});

let added = 0;
Process.attachThreadObserver({
  onAdded(t) {
    if (++added > 2) {
      setTimeout(() => {
        try {
          Stalker.follow(t.id, { transform });
        } catch (e) {
          // gone meanwhile
        }
      }, 20);
    } else if (t.id === Process.getCurrentThreadId()) {
      Stalker.follow({ transform });
    } else {
      Stalker.follow(t.id, { transform });
    }
  },
});
