// compose-config loads a compose file the way `docker compose config` does, with compose-go (the library of
// the Docker Compose CLI): the compose-spec JSON schema, interpolation from an env file, anchors and merge
// keys, and references between services (depends_on, volumes). There is no Docker engine on the development
// machines; this is the real parser without one. Usage: compose-config FILE ENV_FILE; prints the resolved
// model as JSON on stdout, or the error on stderr and exits 1.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: compose-config FILE ENV_FILE")
		os.Exit(2)
	}
	file, envFile := os.Args[1], os.Args[2]
	opts, err := cli.NewProjectOptions(
		[]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithEnvFiles(envFile),
		cli.WithDotEnv,
	)
	if err != nil {
		fail(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
