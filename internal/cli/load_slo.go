package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/stack"
)

// loadTargetInfo is what the served stack says of the load's target: the
// SLO requests are judged by, and the app a function belongs to.
type loadTargetInfo struct {
	slo time.Duration
	app string
}

// loadTarget finds the target's SLO where the gateway has it: --slo, else
// the stack file, else the gateway's own API, so that `gantry load` judges
// against the SLO the gateway serves and never a table of its own.
func loadTarget(cmd *cobra.Command, f *loadFlags) (loadTargetInfo, error) {
	var info loadTargetInfo
	var err error
	switch {
	case f.stack != "":
		info, err = targetFromStack(f)
	case cmd.Flags().Changed("slo"):
	case f.function != "" || f.app != "":
		info, err = targetFromGateway(cmd.Context(), f)
	default:
		return info, usagef("--slo is required with --url: no gateway or stack says the target's SLO")
	}
	if err != nil {
		return info, err
	}
	if cmd.Flags().Changed("slo") {
		info.slo = f.slo
	}
	return info, nil
}

func targetFromStack(f *loadFlags) (loadTargetInfo, error) {
	if f.url != "" {
		return loadTargetInfo{}, usagef("--stack goes with --function or --app, whose SLO it declares")
	}
	s, err := stack.ParseFile(f.stack)
	if err != nil {
		return loadTargetInfo{}, err
	}
	for _, a := range s.Apps {
		if f.app != "" && a.Name == f.app {
			return loadTargetInfo{slo: appSLO(s, a), app: a.Name}, nil
		}
	}
	for _, fn := range s.Functions {
		if f.function != "" && fn.Name == f.function {
			info := loadTargetInfo{slo: fn.SLO}
			for _, a := range s.Apps {
				for _, member := range a.Functions {
					if member == fn.Name {
						info.app = a.Name
					}
				}
			}
			return info, nil
		}
	}
	return loadTargetInfo{}, usagef("%s declares no %s", f.stack, loadTargetName(f))
}

// appSLO is an app's end-to-end SLO: declared, else the sum of its
// functions', as the gateway computes it.
func appSLO(s *stack.Stack, a stack.App) time.Duration {
	if a.SLO > 0 {
		return a.SLO
	}
	var sum time.Duration
	for _, name := range a.Functions {
		for _, fn := range s.Functions {
			if fn.Name == name {
				sum += fn.SLO
			}
		}
	}
	return sum
}

func loadTargetName(f *loadFlags) string {
	if f.app != "" {
		return "app " + f.app
	}
	return "function " + f.function
}

// targetFromGateway reads GET /system/function/NAME or /system/apps/NAME.
func targetFromGateway(ctx context.Context, f *loadFlags) (loadTargetInfo, error) {
	base := strings.TrimSuffix(f.gateway, "/")
	path := "/system/function/" + url.PathEscape(f.function)
	if f.app != "" {
		path = "/system/apps/" + url.PathEscape(f.app)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return loadTargetInfo{}, usagef("--gateway: %v", err)
	}
	fail := func(reason string) error {
		return fmt.Errorf("the SLO of %s: GET %s: %s (pass --slo, or --stack with the gateway's stack file)", loadTargetName(f), base+path, reason)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return loadTargetInfo{}, fail(err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return loadTargetInfo{}, fail(err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		return loadTargetInfo{}, fail(fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body))))
	}
	var got struct {
		SLO string `json:"slo"`
		App string `json:"app"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return loadTargetInfo{}, fail(fmt.Sprintf("answer %.100q: %v", body, err))
	}
	slo, err := time.ParseDuration(got.SLO)
	if err != nil || slo <= 0 {
		return loadTargetInfo{}, fail(fmt.Sprintf("slo %q is not a positive duration", got.SLO))
	}
	info := loadTargetInfo{slo: slo, app: got.App}
	if f.app != "" {
		info.app = f.app
	}
	return info, nil
}
