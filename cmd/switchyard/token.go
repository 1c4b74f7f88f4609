// `switchyard token`: makes API tokens and the hashes the configuration
// stores in their place (auth.tokens). The server never sees a token until
// a client presents it; the configuration holds only hashes.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/graph/auth"
)

func runToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	return tokenCommand(args, os.Stdin, stdout, stderr)
}

// tokenCommand runs `switchyard token new|hash` with stdin as the token's
// source for hash.
func tokenCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: switchyard token new [--name NAME] [--role ROLE] [--agent ID] [--lanes A,B] [--json]")
		fmt.Fprintln(stderr, "       switchyard token hash < token-file")
		fmt.Fprintln(stderr, "\n  new   makes a random token and prints it with its hash and a line for auth.tokens")
		fmt.Fprintln(stderr, "  hash  prints the hash of the token read from standard input")
	}
	if len(args) == 0 {
		usage()
		return fmt.Errorf("%w: new or hash?", errUsage)
	}
	switch args[0] {
	case "new":
		return tokenNew(args[1:], stdout, stderr)
	case "hash":
		return tokenHash(args[1:], stdin, stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return nil
	}
	usage()
	return fmt.Errorf("%w: unknown token command %q", errUsage, args[0])
}

func tokenNew(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("token new", "[flags]", stderr)
	name := fs.String("name", "", "the token's name in the configuration and the audit log (default: from the role and agent)")
	roleName := fs.String("role", "admin", "admin, operator, agent, reader or worker")
	agent := fs.String("agent", "", "the agent an agent token acts for (required with --role agent)")
	laneList := fs.String("lanes", "", "the pull lanes a worker token leases from, comma-separated (required with --role worker)")
	asJSON := fs.Bool("json", false, "print {token, hash, name, role, agentId, lanes} as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	role, err := auth.ParseRole(*roleName)
	if err != nil {
		return fmt.Errorf("%w: --role: %v", errUsage, err)
	}
	switch {
	case role == auth.RoleAgent && *agent == "":
		return fmt.Errorf("%w: --agent is required with --role agent: an agent token acts for one agent", errUsage)
	case role != auth.RoleAgent && *agent != "":
		return fmt.Errorf("%w: --agent goes with --role agent only", errUsage)
	case role == auth.RoleWorker && *laneList == "":
		return fmt.Errorf("%w: --lanes is required with --role worker: a worker token leases from named pull lanes", errUsage)
	case role != auth.RoleWorker && *laneList != "":
		return fmt.Errorf("%w: --lanes goes with --role worker only", errUsage)
	}
	var lanes []string
	if *laneList != "" {
		lanes = strings.Split(*laneList, ",")
	}
	if *name == "" {
		*name = role.String()
		if role == auth.RoleAgent {
			*name = "agent-" + *agent
		}
	}
	tok, err := auth.NewToken()
	if err != nil {
		return err
	}
	hash, err := auth.HashToken(tok)
	if err != nil {
		return err
	}
	// The entry goes through the same checks as the configuration's.
	if _, err := auth.NewAuthenticator([]auth.Token{{Name: *name, Hash: hash, Role: role, AgentID: *agent, Lanes: lanes}}); err != nil {
		return fmt.Errorf("%w: %v", errUsage, strings.TrimPrefix(err.Error(), "tokens[0]."))
	}
	if *asJSON {
		out := map[string]any{"token": tok, "hash": hash, "name": *name, "role": role.String(), "agentId": *agent}
		if lanes != nil {
			out["lanes"] = lanes
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	}
	entry := fmt.Sprintf("{name: %q, hash: %q, role: %s", *name, hash, role)
	if *agent != "" {
		entry += fmt.Sprintf(", agentId: %q", *agent)
	}
	if lanes != nil {
		q := make([]string, len(lanes))
		for i, l := range lanes {
			q[i] = strconv.Quote(l)
		}
		entry += ", lanes: [" + strings.Join(q, ", ") + "]"
	}
	entry += "}"
	fmt.Fprintf(stdout, "token: %s\nhash:  %s\n\n", tok, hash)
	fmt.Fprintf(stdout, "Add the hash to the server's configuration:\n\nauth:\n  tokens:\n    - %s\n\n", entry)
	fmt.Fprintf(stdout, "Give the token to its user (clients send it as Authorization: Bearer <token>, e.g. SWITCHYARD_TOKEN).\n")
	fmt.Fprintf(stdout, "It is stored nowhere and cannot be shown again; to revoke it, remove its line and restart.\n")
	return nil
}

func tokenHash(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("token hash", "< token-file", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, auth.MaxTokenLength+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the token from standard input: %w", err)
	}
	tok := strings.TrimRight(line, "\r\n")
	if tok == "" {
		return fmt.Errorf("%w: give the token on standard input (switchyard token hash < token-file)", errUsage)
	}
	hash, err := auth.HashToken(tok)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, hash)
	return nil
}
