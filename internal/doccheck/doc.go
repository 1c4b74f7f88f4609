// Package doccheck holds a test over the whole repository: every repository
// path that a Markdown file or a Go comment cites must exist, so that the
// docs cannot point a reader at a file that moved or never was.
package doccheck
