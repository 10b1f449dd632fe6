package cli

import (
	"os"
	"testing"
)

// cliChildEnv makes the test binary run as the gantry CLI: tests that start
// gateways (gantry up) or run the README's commands set it, and the
// processes they start, which run this executable as `gantry serve` and
// `gantry fn NAME`, inherit it.
const cliChildEnv = "GANTRY_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		os.Exit(Execute())
	}
	os.Exit(m.Run())
}
