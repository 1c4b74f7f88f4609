// Builds the playground into dist/: index.html, the page's ES module with the
// chunks it imports at once and those it loads on demand (Monaco, prettier),
// one CSS file (content-hashed names under assets/), Monaco's three web
// workers and its icon font (also hashed), and THIRD_PARTY_LICENSES.txt with
// the licence of every npm package that ends up in the output. The Go
// package embeds dist/.
//
// The build is reproducible: the same inputs give byte-identical files. It
// records a digest of its inputs in index.html so a Go test can tell when
// dist/ is stale without running node (see ../webbuild).
//
// Usage: npm ci && node build.mjs   (go generate ./graph/web/... does both)

import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { inputsDigest, licenses, sizeReport } from '../webbuild/webbuild.mjs';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
const assets = join(dist, 'assets');

// GraphiQL loads prettier's babel parser and estree printer only to prettify
// JSON with comments; src/prettier-jsonc.js does that with jsonc-parser.
// It also imports prettier's GraphQL parser twice, once by its old name
// (prettier/parser-graphql, a UMD file): split into a chunk of its own, that
// one would export only a default, not the `parsers` GraphiQL reads, so both
// names resolve to the ES module.
const prettierJSONC = {
  name: 'prettier-jsonc',
  setup(b) {
    b.onResolve({ filter: /^prettier\/(plugins\/estree|plugins\/babel|parser-babel)$/ }, () => ({
      path: join(root, 'src/prettier-jsonc.js'),
    }));
    b.onResolve({ filter: /^prettier\/parser-graphql$/ }, (args) =>
      b.resolve('prettier/plugins/graphql', { kind: args.kind, resolveDir: args.resolveDir }),
    );
  },
};

const common = {
  absWorkingDir: root,
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: 'none', // collected into THIRD_PARTY_LICENSES.txt instead
  charset: 'utf8',
  target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
  platform: 'browser',
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
  plugins: [prettierJSONC],
  metafile: true,
  write: true,
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  banner: { js: '/*! Third-party notices: THIRD_PARTY_LICENSES.txt */', css: '/*! Third-party notices: THIRD_PARTY_LICENSES.txt */' },
};

function outputFor(metafile, entryPoint) {
  for (const [out, meta] of Object.entries(metafile.outputs)) {
    if (meta.entryPoint === entryPoint && out.endsWith('.js')) {
      if (!meta.cssBundle) throw new Error(`build: no stylesheet for ${entryPoint}`);
      return { js: out, css: meta.cssBundle };
    }
  }
  throw new Error(`build: no output for ${entryPoint}`);
}

const assetName = (out) => relative(assets, join(root, out)).split(sep).join('/');

async function build() {
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });

  // 1. Monaco's web workers, each a classic (iife) script of its own.
  const workerEntries = {
    editor: 'monaco-editor/esm/vs/editor/editor.worker.js',
    json: 'monaco-editor/esm/vs/language/json/json.worker.js',
    graphql: 'monaco-graphql/esm/graphql.worker.js',
  };
  const workers = await esbuild.build({
    ...common,
    entryPoints: Object.entries(workerEntries).map(([label, input]) => ({ in: input, out: `${label}.worker` })),
    format: 'iife',
  });
  const workerFiles = {};
  for (const [label, input] of Object.entries(workerEntries)) {
    const entry = Object.values(workers.metafile.outputs).find((o) => o.entryPoint && o.entryPoint.endsWith(input));
    const out = Object.keys(workers.metafile.outputs).find((k) => workers.metafile.outputs[k] === entry);
    workerFiles[label] = `./${assetName(out)}`;
  }

  // 2. The page itself: an ES module and one stylesheet. What the first
  // paint does not need is split into chunks loaded on demand: Monaco and
  // its GraphQL language (GraphiQL imports them dynamically), prettier.
  // Fonts become hashed files.
  const main = await esbuild.build({
    ...common,
    entryPoints: [{ in: 'src/main.jsx', out: 'playground' }],
    format: 'esm',
    splitting: true,
    chunkNames: 'chunk-[hash]',
    jsx: 'automatic',
    loader: { '.ttf': 'file', '.woff': 'file', '.woff2': 'file' },
    define: { ...common.define, __SWITCHYARD_WORKERS__: JSON.stringify(workerFiles) },
  });
  const out = outputFor(main.metafile, 'src/main.jsx');
  const js = assetName(out.js);
  const css = assetName(out.css);
  // The entry's stylesheet holds the CSS of every chunk, lazy ones included
  // (Monaco's); the chunks' own stylesheets, which nothing loads, go.
  for (const file of Object.keys(main.metafile.outputs)) {
    if (file.endsWith('.css') && file !== out.css) {
      rmSync(join(root, file));
      delete main.metafile.outputs[file];
    }
  }

  // A chunk nothing imports (esbuild keeps the chunk of a dynamic import
  // whose importer was dropped as dead code) goes too.
  const reached = new Set([out.js]);
  const reach = (file) => {
    for (const imp of main.metafile.outputs[file].imports) {
      if (imp.path in main.metafile.outputs && !reached.has(imp.path)) {
        reached.add(imp.path);
        reach(imp.path);
      }
    }
  };
  reach(out.js);
  for (const file of Object.keys(main.metafile.outputs)) {
    if (file.endsWith('.js') && !reached.has(file)) {
      rmSync(join(root, file));
      delete main.metafile.outputs[file];
    }
  }

  // The chunks the entry imports statically are fetched with it
  // (modulepreload), not after it has been parsed.
  const firstLoad = new Set();
  const visit = (file) => {
    for (const imp of main.metafile.outputs[file].imports) {
      if (imp.kind === 'import-statement' && !firstLoad.has(imp.path)) {
        firstLoad.add(imp.path);
        visit(imp.path);
      }
    }
  };
  visit(out.js);
  const preload = [...firstLoad]
    .sort()
    .map((f) => `<link rel="modulepreload" href="assets/${assetName(f)}">`)
    .join('\n    ');

  // 3. index.html: asset names and the input digest filled in; {{TITLE}} and
  // {{CONFIG}} stay for the Go handler.
  const html = readFileSync(join(root, 'src/index.html'), 'utf8')
    .replace('{{BUILD_INPUTS}}', inputsDigest(root))
    .replace('{{CSS}}', `assets/${css}`)
    .replace('{{JS}}', `assets/${js}`)
    .replace('{{PRELOAD}}', preload);
  writeFileSync(join(dist, 'index.html'), html);

  // 4. Licences of every package whose code is in the output.
  writeFileSync(
    join(dist, 'THIRD_PARTY_LICENSES.txt'),
    licenses(root, 'the Switchyard playground', [workers.metafile, main.metafile]),
  );

  sizeReport(dist);
}

build().catch((err) => {
  console.error(err);
  process.exit(1);
});
