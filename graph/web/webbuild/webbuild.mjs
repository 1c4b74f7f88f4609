// Shared pieces of the builds of Switchyard's web apps (graph/web/*/build.mjs):
// the digest of a build's inputs, the third-party licence notice, and the
// size report. Only node: built-ins here, so an app's build can import this
// file from outside its own node_modules. The Go package in this folder
// recomputes the digest (InputsDigest) for the tests that catch a stale dist/.

import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const self = fileURLToPath(import.meta.url);

/**
 * inputsDigest hashes everything that decides an app's build output: its
 * build.mjs, package.json, package-lock.json and src/ tree, and this file.
 * Each file contributes its path (relative to the app, '/'-separated), a NUL,
 * its bytes and a NUL, in sorted path order; the result is hex SHA-256.
 */
export function inputsDigest(appRoot) {
  const files = ['build.mjs', 'package.json', 'package-lock.json'];
  const walk = (dir) => {
    for (const name of readdirSync(join(appRoot, dir)).sort()) {
      const rel = `${dir}/${name}`;
      if (statSync(join(appRoot, rel)).isDirectory()) walk(rel);
      else files.push(rel);
    }
  };
  walk('src');
  files.push(relative(appRoot, self).split('\\').join('/'));
  files.sort();
  const h = createHash('sha256');
  for (const f of files) {
    h.update(f);
    h.update('\0');
    h.update(readFileSync(join(appRoot, f)));
    h.update('\0');
  }
  return h.digest('hex');
}

// packageOf finds the npm package (nearest package.json with a name and a
// version) that holds an input file of a bundle.
function packageOf(appRoot, input) {
  if (!input.includes('node_modules/')) return null;
  const top = join(appRoot, 'node_modules');
  let dir = dirname(join(appRoot, input));
  while (dir.startsWith(top)) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      const meta = JSON.parse(readFileSync(pj, 'utf8'));
      if (meta.name && meta.version) return { dir, meta };
    }
    dir = dirname(dir);
  }
  throw new Error(`webbuild: no package.json above ${input}`);
}

function licenseName(meta) {
  if (typeof meta.license === 'string') return meta.license;
  if (meta.license && meta.license.type) return meta.license.type;
  if (Array.isArray(meta.licenses)) return meta.licenses.map((l) => l.type || l).join(' OR ');
  return 'UNKNOWN';
}

/**
 * licenses returns the text of THIRD_PARTY_LICENSES.txt: every npm package
 * with code in the outputs of the given esbuild metafiles, with the licence
 * files it ships (or, when it ships none, the licence its package.json
 * declares).
 */
export function licenses(appRoot, title, metafiles) {
  const pkgs = new Map();
  for (const mf of metafiles) {
    for (const input of Object.keys(mf.inputs)) {
      const pkg = packageOf(appRoot, input);
      if (pkg) pkgs.set(`${pkg.meta.name}@${pkg.meta.version}`, pkg);
    }
  }
  const ids = [...pkgs.keys()].sort();
  const heading = `Third-party software in ${title}`;
  const parts = [
    heading,
    '='.repeat(heading.length),
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
  return `${parts.join('\n')}\n`;
}

/**
 * sizeReport prints the raw and gzipped size of every file under dist, and
 * the totals: the figures to quote for the embedded bundle.
 */
export function sizeReport(dist) {
  let raw = 0;
  let gz = 0;
  const rows = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) {
        walk(p);
        continue;
      }
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
