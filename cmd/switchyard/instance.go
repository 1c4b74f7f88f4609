// `switchyard instance`: the built-in headless Chromium instance on its own,
// serving PinchTab's instance API for a Switchyard (or any PinchTab client)
// elsewhere.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
	"github.com/switchyard/switchyard/executor/chromium"
)

func runInstance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// The same command's client verbs (client_cmds.go) are named too, so
	// that `instance -h` shows them.
	var verbs strings.Builder
	for _, v := range cli.InstanceVerbs() {
		fmt.Fprintf(&verbs, "\n  %-9s %s", v.Name, v.Summary)
	}
	fs := newFlags("instance", "[flags]   (runs the built-in Chromium instance alone)\n"+
		"       switchyard instance VERB … [-h]   (a server's instances)\n\nVerbs:"+verbs.String(), stderr)
	listen := fs.String("listen", "127.0.0.1:9867", "the HTTP address")
	token := fs.String("token", os.Getenv("SWITCHYARD_INSTANCE_TOKEN"), "the bearer token clients must send (default $SWITCHYARD_INSTANCE_TOKEN, else a random one, printed)")
	browser := fs.String("chromium", "", "the browser executable (default: found on the system)")
	agentIdle := fs.Duration("agent-context-idle", chromium.DefaultAgentContextIdle,
		"how long an agent's browser context (its cookies and storage) outlives its last tab; match the server's executor.idleTabTimeout (negative: kept while the instance runs)")
	autoAccept := fs.Bool("dialog-auto-accept", false, "accept every JavaScript dialog (alert, confirm, prompt, beforeunload) as it opens, instead of holding up the tab's requests until POST /tabs/{id}/dialog answers it")
	logLevel := fs.String("log-level", "info", "trace, debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := newLogger(*logLevel, *logFormat, stderr)
	path := *browser
	if path == "" {
		p, ok := chromium.Find()
		if !ok {
			return errors.New("no Chromium found (install Debian's chromium, or pass --chromium)")
		}
		path = p
	}
	in, err := chromium.Start(ctx, chromium.Options{Addr: *listen, Token: *token, ExecPath: path, Logger: log, AgentContextIdle: *agentIdle,
		DialogAutoAccept: *autoAccept})
	if err != nil {
		return fmt.Errorf("start the instance: %w", err)
	}
	log.Info("instance ready", "url", in.URL(), "browser", path)
	if *token == "" {
		fmt.Fprintf(stdout, "token: %s\n", in.Token())
	}
	fmt.Fprintf(stdout, "instance listening on %s\n", in.URL())
	<-ctx.Done()
	log.Info("stopping")
	done := make(chan error, 1)
	go func() { done <- in.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("the browser did not stop within 10s")
	}
}
