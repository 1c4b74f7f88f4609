package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"

	"github.com/switchyard/switchyard/graph/generated"
)

// readmeBlocks returns the README's fenced blocks of a language, with the
// line each starts on.
func readmeBlocks(t *testing.T, lang string) map[int]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := map[int]string{}
	lines := strings.Split(string(readme), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```"+lang {
			continue
		}
		start := i + 1
		var b strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.WriteString(lines[i] + "\n")
		}
		blocks[start] = b.String()
	}
	return blocks
}

// Every GraphQL snippet of the README — the tour and every other one —
// parses and validates against the schema the server runs.
func TestEveryGraphQLBlockInTheReadmeValidates(t *testing.T) {
	t.Parallel()
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	blocks := readmeBlocks(t, "graphql")
	require.GreaterOrEqual(t, len(blocks), len(tourOperations(t))+3, "the tour's blocks and the others")
	for line, doc := range blocks {
		_, errs := gqlparser.LoadQueryWithRules(schema, doc, nil) // nil: every rule of the spec
		require.Empty(t, errs, "README.md:%d: the ```graphql block does not validate:\n%s", line, doc)
	}
}

// Every `switchyard …` command line in the README's shell blocks names a
// real command and verb, with flags it takes: each is run with -h appended,
// which parses everything before it and then prints the usage.
func TestEveryCommandLineInTheReadmeParses(t *testing.T) {
	t.Parallel()
	env := regexp.MustCompile(`^([A-Z_]+=\S+\s+)+`)
	var n int
	for line, block := range readmeBlocks(t, "sh") {
		for _, cmd := range strings.Split(block, "\n") {
			cmd = strings.TrimSpace(env.ReplaceAllString(strings.TrimSpace(cmd), ""))
			if !strings.HasPrefix(cmd, "switchyard ") {
				continue
			}
			for _, end := range []string{" #", " <", " |", " >"} {
				if i := strings.Index(cmd, end); i >= 0 {
					cmd = cmd[:i]
				}
			}
			args := shellWords(t, strings.TrimPrefix(cmd, "switchyard "))
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(args, "-h"), &out, &errOut)
			require.Equal(t, 0, code, "README.md (block at line %d): `%s` does not parse:\n%s", line, cmd, errOut.String())
			require.Contains(t, errOut.String(), "Usage: switchyard", "`%s` printed its usage", cmd)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 20, "the README shows the commands")
}

// shellWords splits a command line the way sh would for the README's
// examples: words, 'single' and "double" quotes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	require.Zero(t, quote, "unbalanced quotes in %q", s)
	if inWord {
		words = append(words, w.String())
	}
	return words
}
