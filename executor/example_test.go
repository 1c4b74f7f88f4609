package executor_test

import (
	"context"
	"log"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/chromium"
)

// How a server wires the executor: a local Chromium instance when the machine
// has one, instances from the config file, a registry that tells the engine
// about them, and the executor the engine hands attempts to.
func Example() {
	logger := hclog.New(&hclog.LoggerOptions{Name: "switchyard"})
	reg := executor.NewRegistry(executor.RegistryOptions{Logger: logger})
	defer reg.Close()

	if path, ok := chromium.Find(); ok {
		local, err := chromium.Start(context.Background(), chromium.Options{ExecPath: path, Logger: logger})
		if err != nil {
			log.Fatal(err)
		}
		defer local.Close()
		logger.Info("local browser instance", "url", local.URL())
		if _, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "local", URL: local.URL(), Token: local.Token(), Capacity: 8}); err != nil {
			log.Fatal(err)
		}
	}
	// From the config file, for example an existing PinchTab server:
	if _, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "fleet", URL: "http://127.0.0.1:9867", Token: "…", Kind: executor.KindServer}); err != nil {
		log.Fatal(err)
	}

	store, err := artifact.NewDir("/var/lib/switchyard/artifacts")
	if err != nil {
		log.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Registry: reg, Artifacts: store, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()

	// eng := engine.New(engine.Options{Executor: exec, …})
	// reg.SetSink(eng) // the engine learns the fleet and its health
	// events, stop := reg.Subscribe(64) // for the instanceEvents subscription
}
