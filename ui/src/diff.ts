// A line diff of a tool call's edit (old and new text of one file), shown
// as a unified diff: hunks with three lines of context, removed lines "-",
// added lines "+". Myers' O(ND) algorithm; past maxEdits differences the
// diff is given up for "every old line removed, every new line added".

export type Op = { kind: "ctx" | "del" | "add"; text: string; oldNo?: number; newNo?: number };
export type Hunk = { header: string; lines: Op[] };

const maxEdits = 2000;
const context = 3;

/** lines splits text into lines (a last line without its newline counts). */
export function lines(text: string): string[] {
  if (text === "") return [];
  const l = text.split("\n");
  if (l[l.length - 1] === "") l.pop();
  return l;
}

/** diffLines is the edit script from a to b, in order. */
export function diffLines(a: string[], b: string[]): Op[] {
  // Common head and tail first: an edit usually touches a small part.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const ops: Op[] = [];
  for (let i = 0; i < head; i++) ops.push({ kind: "ctx", text: a[i], oldNo: i + 1, newNo: i + 1 });
  const mid = myers(a.slice(head, a.length - tail), b.slice(head, b.length - tail));
  for (const op of mid) {
    if (op.oldNo !== undefined) op.oldNo += head;
    if (op.newNo !== undefined) op.newNo += head;
    ops.push(op);
  }
  for (let k = tail; k > 0; k--) {
    const i = a.length - k, j = b.length - k;
    ops.push({ kind: "ctx", text: a[i], oldNo: i + 1, newNo: j + 1 });
  }
  return ops;
}

function myers(a: string[], b: string[]): Op[] {
  const n = a.length, m = b.length;
  const replaceAll = (): Op[] => [
    ...a.map((text, i): Op => ({ kind: "del", text, oldNo: i + 1 })),
    ...b.map((text, j): Op => ({ kind: "add", text, newNo: j + 1 })),
  ];
  if (n === 0 || m === 0) return replaceAll();
  const max = Math.min(n + m, maxEdits);
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  // trace[d] is the frontier before step d, for k in [-d, d] (O(D²) memory).
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    trace.push(v.slice(off - d, off + d + 1));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[off + k] = x;
      if (x >= n && y >= m) { found = d; break; }
    }
  }
  if (found < 0) return replaceAll();
  // Walk back through the saved frontiers.
  const rev: Op[] = [];
  let x = n, y = m;
  for (let d = found; d > 0; d--) {
    const pv = trace[d]; // index k + d
    const at = (k: number) => pv[k + d];
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const px = at(prevK), py = px - prevK;
    while (x > px && y > py) { x--; y--; rev.push({ kind: "ctx", text: a[x], oldNo: x + 1, newNo: y + 1 }); }
    if (x === px) { y--; rev.push({ kind: "add", text: b[y], newNo: y + 1 }); } else { x--; rev.push({ kind: "del", text: a[x], oldNo: x + 1 }); }
  }
  while (x > 0 && y > 0) { x--; y--; rev.push({ kind: "ctx", text: a[x], oldNo: x + 1, newNo: y + 1 }); }
  return rev.reverse();
}

/** hunks groups an edit script into unified-diff hunks. */
export function hunks(ops: Op[]): Hunk[] {
  // Old and new lines before each op, for the hunk headers.
  const oldBefore: number[] = [], newBefore: number[] = [];
  let o = 0, nw = 0;
  for (const op of ops) {
    oldBefore.push(o);
    newBefore.push(nw);
    if (op.kind !== "add") o++;
    if (op.kind !== "del") nw++;
  }
  const changed = (i: number) => ops[i].kind !== "ctx";
  const out: Hunk[] = [];
  let i = 0;
  while (i < ops.length) {
    if (!changed(i)) { i++; continue; }
    const start = Math.max(0, i - context);
    let end = i;
    for (;;) {
      while (end < ops.length && changed(end)) end++;
      let next = end;
      while (next < ops.length && !changed(next)) next++;
      if (next < ops.length && next - end <= 2 * context) { end = next; continue; }
      end = Math.min(ops.length, end + context);
      break;
    }
    const lines = ops.slice(start, end);
    const oldLen = lines.filter((l) => l.kind !== "add").length;
    const newLen = lines.filter((l) => l.kind !== "del").length;
    const range = (before: number, len: number) => len === 1 ? `${before + 1}` : `${len === 0 ? before : before + 1},${len}`;
    out.push({ header: `@@ -${range(oldBefore[start], oldLen)} +${range(newBefore[start], newLen)} @@`, lines });
    i = end;
  }
  return out;
}
