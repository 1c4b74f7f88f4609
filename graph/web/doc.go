// Package web groups the browser applications that Switchyard serves from
// assets embedded in its binary, so they work with no network access beyond
// the server itself (no CDN):
//
//	web/spa         serving of one built single-page app: the HTML page with
//	                server-side configuration, content-hashed assets with
//	                long-lived caching, ETags and gzip (spa.Embedded builds
//	                an app's handler from its embedded dist/)
//	web/webbuild    what the apps' builds share: webbuild.mjs (input digest,
//	                licence notice, size report) and its Go side, which lets
//	                a test catch a dist/ that is stale against its sources
//	web/playground  the GraphiQL playground served at "/" (npm project, built
//	                with esbuild into playground/dist/, embedded with go:embed)
//	web/dashboard   the live dashboard served at "/dashboard" (TypeScript and
//	                Preact, built the same way), driven by the public API only
//
// Each app is one folder that is both an npm project (package.json,
// package-lock.json, build.mjs, src/, dist/) and the Go package that embeds
// its dist/ and returns spa.Embedded's handler. Another app is added the
// same way: web/<app> with its own npm project, a build.mjs that imports
// ../webbuild/webbuild.mjs, a //go:generate directive, the same freshness
// test, and its mount in graph/server (README.md, "Adding an app").
//
// The built files are committed: `go build` needs neither node nor npm.
// `go generate ./graph/web/...` rebuilds them and needs node (>= 20) and npm
// with access to the npm registry.
package web
