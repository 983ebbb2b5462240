// The page title counts the permission requests waiting for an answer while
// the tab is in the background: "(2) Paddock".
const base = "Paddock";
let count = 0;

function update(): void {
  const t = document.hidden && count > 0 ? `(${count}) ${base}` : base;
  if (document.title !== t) document.title = t;
}

/** setPendingCount sets how many requests the page shows as waiting. */
export function setPendingCount(n: number): void {
  count = n;
  update();
}

document.addEventListener("visibilitychange", update);
