package e2etest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespaceNameIsALabelThatNamesTheTest(t *testing.T) {
	for _, test := range []string{
		"TestDelete",
		"TestScale/burst_of_5/mode=interval",
		"TestAVeryLongNameThatGoesOnAndOnPastWhatANamespaceMayHold/AndASubtestToo",
		"TestTrailing/",
	} {
		name := NamespaceName(test)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("NamespaceName(%q) = %q: %v", test, name, errs)
		}
		if want := strings.ToLower(test[:8]); !strings.HasPrefix(name, want) {
			t.Errorf("NamespaceName(%q) = %q, want it to start with %q", test, name, want)
		}
	}
}

// Eventually retries both a false condition and an error, and returns as
// soon as the condition holds.
func TestEventuallyRetriesUntilTheConditionHolds(t *testing.T) {
	calls := 0
	Eventually(t, "the third call", func(context.Context) (bool, error) {
		calls++
		switch calls {
		case 1:
			return false, nil
		case 2:
			return true, errors.New("not yet")
		}
		return true, nil
	})
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}
