// Builds the UI into dist/ (embedded in the paddock binary by embed.go).
// The output must be byte-for-byte reproducible: CI rebuilds it and fails
// when it differs from the committed copy. No hashes, timestamps or source
// maps with absolute paths go into it.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = "dist";
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: "src/main.ts", style: "src/style.css" },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  outdir: out,
  legalComments: "eof",
  charset: "utf8",
  logLevel: "warning",
});
copyFileSync("src/index.html", `${out}/index.html`);
