// Builds the dashboard into dist/: index.html, one JS bundle and one CSS file
// (content-hashed names under assets/), and THIRD_PARTY_LICENSES.txt with the
// licence of every npm package in the output. The Go package embeds dist/.
//
// The GraphQL operations (the /* GraphQL */ strings of src/queries.ts) go
// through graphql-codegen first: it validates them against the schema
// (../../schema/*.graphqls) and writes their types to
// src/graphql.generated.ts; the build stops when one does not validate.
// The sources are TypeScript: `tsc` (typescript 7, the native compiler)
// checks them next and the build stops on a type error; esbuild then strips
// the types and bundles. The build is reproducible: the same inputs give
// byte-identical files, and it records a digest of its inputs in index.html
// so a Go test can tell when dist/ is stale without running node.
//
// Usage: npm ci && node build.mjs   (go generate ./graph/web/... does both)

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generate } from '@graphql-codegen/cli';
import * as esbuild from 'esbuild';
import { inputsDigest, licenses, sizeReport } from '../webbuild/webbuild.mjs';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
const assets = join(dist, 'assets');

// codegen validates the operations and writes their types.
async function codegen() {
  const out = join(root, 'src', 'graphql.generated.ts');
  try {
    await generate(
      {
        schema: join(root, '..', '..', 'schema', '*.graphqls'),
        documents: [join(root, 'src', 'queries.ts')],
        generates: {
          [out]: {
            plugins: ['typescript-operations'],
            config: {
              enumsAsTypes: true,
              avoidOptionals: { field: true, object: true, inputValue: false, defaultValue: false },
              skipTypename: true,
              useTypeImports: true,
              maybeValue: 'T | null',
              inputMaybeValue: 'T | null | undefined',
              strictScalars: true,
              scalars: { Time: 'string', JSON: 'unknown', Int64: 'number' },
            },
          },
        },
        silent: true,
        errorsOnly: true,
      },
      true,
    );
  } catch (err) {
    console.error(`build: an operation does not validate against the schema:\n${err.message ?? err}`);
    process.exit(1);
  }
}

function typecheck() {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', join(root, 'src', 'tsconfig.json')], { stdio: 'inherit', cwd: root });
  } catch {
    console.error('build: the type check failed (see above)');
    process.exit(1);
  }
}

const assetName = (out) => relative(assets, join(root, out)).split(sep).join('/');

async function build() {
  await codegen();
  typecheck();
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(assets, { recursive: true });

  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [{ in: 'src/main.tsx', out: 'dashboard' }],
    bundle: true,
    minify: true,
    sourcemap: false,
    legalComments: 'none', // collected into THIRD_PARTY_LICENSES.txt instead
    charset: 'utf8',
    target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
    platform: 'browser',
    format: 'esm',
    splitting: false,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: 'src/tsconfig.json',
    logLevel: 'warning',
    metafile: true,
    write: true,
    outdir: assets,
    entryNames: '[name]-[hash]',
    banner: { js: '/*! Third-party notices: THIRD_PARTY_LICENSES.txt */', css: '/*! Third-party notices: THIRD_PARTY_LICENSES.txt */' },
  });
  const outs = Object.keys(result.metafile.outputs);
  const js = outs.find((o) => o.endsWith('.js'));
  const css = outs.find((o) => o.endsWith('.css'));
  if (!js || !css) throw new Error(`build: expected one .js and one .css output, got ${outs.join(', ')}`);

  // index.html: asset names and the input digest filled in; {{TITLE}} and
  // {{CONFIG}} stay for the Go handler.
  const html = readFileSync(join(root, 'src/index.html'), 'utf8')
    .replace('{{BUILD_INPUTS}}', inputsDigest(root))
    .replace('{{CSS}}', `assets/${assetName(css)}`)
    .replace('{{JS}}', `assets/${assetName(js)}`);
  writeFileSync(join(dist, 'index.html'), html);
  writeFileSync(join(dist, 'THIRD_PARTY_LICENSES.txt'), licenses(root, 'the Switchyard dashboard', [result.metafile]));

  sizeReport(dist);
}

build().catch((err) => {
  console.error(err);
  process.exit(1);
});
