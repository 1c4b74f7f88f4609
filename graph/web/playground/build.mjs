// Builds the playground into dist/: index.html, one JS bundle and one CSS file
// (content-hashed names under assets/), Monaco's three web workers and its icon
// font (also hashed), and THIRD_PARTY_LICENSES.txt with the licence of every
// npm package that ends up in the output. The Go package embeds dist/.
//
// The build is reproducible: the same inputs give byte-identical files. It
// records a digest of its inputs in index.html so a Go test can tell when
// dist/ is stale without running node.
//
// Usage: npm ci && node build.mjs   (go generate ./graph/web/... does both)

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
const assets = join(dist, 'assets');

// Files whose content decides the output. Keep in sync with buildInputs in
// the Go test (playground_test.go), which recomputes this digest.
function buildInputsDigest() {
  const files = ['build.mjs', 'package.json', 'package-lock.json'];
  const walk = (dir) => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const rel = `${dir}/${name}`;
      if (statSync(join(root, rel)).isDirectory()) walk(rel);
      else files.push(rel);
    }
  };
  walk('src');
  files.sort();
  const h = createHash('sha256');
  for (const f of files) {
    h.update(f);
    h.update('\0');
    h.update(readFileSync(join(root, f)));
    h.update('\0');
  }
  return h.digest('hex');
}

// GraphiQL loads prettier's babel parser and estree printer only to prettify
// JSON with comments; src/prettier-jsonc.js does that with jsonc-parser.
const prettierJSONC = {
  name: 'prettier-jsonc',
  setup(b) {
    b.onResolve({ filter: /^prettier\/(plugins\/estree|plugins\/babel|parser-babel)$/ }, () => ({
      path: join(root, 'src/prettier-jsonc.js'),
    }));
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

function outputFor(metafile, entryPoint, ext) {
  for (const [out, meta] of Object.entries(metafile.outputs)) {
    if (meta.entryPoint === entryPoint && out.endsWith(ext)) return out;
    if (ext === '.css' && meta.entryPoint === undefined && out.endsWith('.css')) return out;
  }
  throw new Error(`build: no ${ext} output for ${entryPoint}`);
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

  // 2. The page itself: one ES module and one stylesheet. Dynamic imports
  // are inlined (no code splitting), fonts become hashed files.
  const main = await esbuild.build({
    ...common,
    entryPoints: [{ in: 'src/main.jsx', out: 'playground' }],
    format: 'esm',
    splitting: false,
    jsx: 'automatic',
    loader: { '.ttf': 'file', '.woff': 'file', '.woff2': 'file' },
    define: { ...common.define, __SWITCHYARD_WORKERS__: JSON.stringify(workerFiles) },
  });
  const js = assetName(outputFor(main.metafile, 'src/main.jsx', '.js'));
  const css = assetName(outputFor(main.metafile, 'src/main.jsx', '.css'));

  // 3. index.html: asset names and the input digest filled in; {{TITLE}} and
  // {{CONFIG}} stay for the Go handler.
  const html = readFileSync(join(root, 'src/index.html'), 'utf8')
    .replace('{{BUILD_INPUTS}}', buildInputsDigest())
    .replace('{{CSS}}', `assets/${css}`)
    .replace('{{JS}}', `assets/${js}`);
  writeFileSync(join(dist, 'index.html'), html);

  // 4. Licences of every package whose code is in the output.
  writeFileSync(join(dist, 'THIRD_PARTY_LICENSES.txt'), licenses([workers.metafile, main.metafile]));

  report();
}

// packageOf finds the npm package (nearest package.json with a name) that
// holds an input file of the bundle.
function packageOf(input) {
  if (!input.includes('node_modules/')) return null;
  let dir = dirname(join(root, input));
  while (dir.startsWith(join(root, 'node_modules'))) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      const meta = JSON.parse(readFileSync(pj, 'utf8'));
      if (meta.name && meta.version) return { dir, meta };
    }
    dir = dirname(dir);
  }
  throw new Error(`build: no package.json above ${input}`);
}

function licenses(metafiles) {
  const pkgs = new Map();
  for (const mf of metafiles) {
    for (const input of Object.keys(mf.inputs)) {
      const pkg = packageOf(input);
      if (pkg) pkgs.set(`${pkg.meta.name}@${pkg.meta.version}`, pkg);
    }
  }
  const ids = [...pkgs.keys()].sort();
  const parts = [
    'Third-party software in the Switchyard playground',
    '=================================================',
    '',
    'The JavaScript, CSS, font and worker files served with this page bundle',
    `the following ${ids.length} npm packages. Their licences follow.`,
    '',
    ...ids.map((id) => `- ${id} (${licenseName(pkgs.get(id).meta)})`),
    '',
  ];
  for (const id of ids) {
    const { dir, meta } = pkgs.get(id);
    parts.push('-'.repeat(78), `${id}  (${licenseName(meta)})`, '-'.repeat(78), '');
    const files = readdirSync(dir)
      .filter((f) => /^(licen[cs]e|copying|notice|thirdpartynotices)/i.test(f))
      .sort();
    if (files.length === 0) {
      parts.push(`No licence file is shipped in this package; its package.json declares: ${licenseName(meta)}.`);
      if (meta.author) parts.push(`Author: ${typeof meta.author === 'string' ? meta.author : meta.author.name}`);
      parts.push('');
    }
    for (const f of files) {
      parts.push(readFileSync(join(dir, f), 'utf8').replace(/\r\n/g, '\n').trimEnd(), '');
    }
  }
  return parts.join('\n') + '\n';
}

function licenseName(meta) {
  if (typeof meta.license === 'string') return meta.license;
  if (meta.license && meta.license.type) return meta.license.type;
  if (Array.isArray(meta.licenses)) return meta.licenses.map((l) => l.type || l).join(' OR ');
  return 'UNKNOWN';
}

function report() {
  let raw = 0;
  let gz = 0;
  const rows = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) { walk(p); continue; }
      const data = readFileSync(p);
      const z = gzipSync(data, { level: 9 }).length;
      raw += data.length;
      gz += z;
      rows.push(`${String(data.length).padStart(10)} ${String(z).padStart(10)}  ${relative(dist, p)}`);
    }
  };
  walk(dist);
  console.log(`${'raw'.padStart(10)} ${'gzip'.padStart(10)}  file`);
  for (const r of rows) console.log(r);
  console.log(`${String(raw).padStart(10)} ${String(gz).padStart(10)}  total`);
}

build().catch((err) => {
  console.error(err);
  process.exit(1);
});
