package cli

import "testing"

// Every out-of-bounds async flag of serve is a usage error (exit 2) before
// anything starts.
func TestServeAsyncBadFlagsAreUsageErrors(t *testing.T) {
	cases := [][]string{
		{"--nats-url", "http://127.0.0.1:4222"},
		{"--nats-url", "nats://"},
		{"--nats-url", "::bad"},
		{"--async-queue", "-1"},
		{"--async-queue", "10000001"},
		{"--async-callback-retries", "-1"},
		{"--async-callback-retries", "101"},
		{"--async-workers", "-3"},
		{"--async-workers", "10001"},
		{"--async-ack-wait", "500ms"},
		{"--async-ack-wait", "2h"},
		// 0 would be replaced by the default unseen.
		{"--async-queue", "0"},
		{"--async-callback-retries", "0"},
		{"--async-workers", "0"},
		{"--async-ack-wait", "0s"},
	}
	assertUsageErrors(t, []string{"serve", "--addr", "127.0.0.1:0"}, cases)
}
