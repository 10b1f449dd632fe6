package liverun

import (
	"strings"
	"testing"
)

// A function that started no instance while measured has no cold start to
// average: the report says so instead of claiming 0 ms.
func TestMarkdownShowsNoColdStartWithoutSpawns(t *testing.T) {
	r := &Report{App: "a", Policy: "gantry", Functions: []FunctionReport{
		{Name: "warm", Spawned: 0, Completed: 10},
		{Name: "grew", Spawned: 2, Completed: 10, MeanColdMs: 1510},
	}}
	md := r.markdown()
	if !strings.Contains(md, "| warm | 0 | 10 | – |") {
		t.Errorf("warm row:\n%s", md)
	}
	if !strings.Contains(md, "| grew | 2 | 10 | 1510 ms |") {
		t.Errorf("grew row:\n%s", md)
	}
}
