// Package doccheck holds a test over the whole repository: every repository
// path that a Markdown file or a Go comment cites must exist, so that the
// docs cannot point a reader at a file that moved or never was. A cited path
// is a Markdown link's target, or a word that starts with one of the
// repository's top-level folders (found from the files git lists, so a new
// folder is covered as soon as it is added). Every Markdown file is read
// (the ABI, the ADRs, the examples' READMEs among them: a test says so) and
// every Go file but generated code. CI runs it with the other tests.
package doccheck
