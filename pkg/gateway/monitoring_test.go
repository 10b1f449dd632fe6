package gateway

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"gantry.dev/gantry/config/monitoring"
)

// seriesName is a metric name the dashboard or the rules query.
var seriesName = regexp.MustCompile(`\b(?:gateway|gantry)_[a-z_]+\b`)

// dashboardQueries are the PromQL expressions of every panel and variable.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(monitoring.Dashboard, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Query)
	}
	return out
}

// ruleQueries are the rules' expressions; every recording rule an alert
// reads must be defined in the file.
func ruleQueries(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Record, Alert, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(monitoring.Rules, &f); err != nil {
		t.Fatalf("rules: %v", err)
	}
	recorded := map[string]bool{}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	for _, e := range out {
		for _, rec := range regexp.MustCompile(`gantry:[a-z_:0-9]+`).FindAllString(e, -1) {
			if !recorded[rec] {
				t.Errorf("rule expression reads %s, which no rule records", rec)
			}
		}
	}
	if len(out) == 0 || len(recorded) == 0 {
		t.Fatal("no rules")
	}
	return out
}

// Every series the shipped dashboard and alert rules query is in /metrics
// after some traffic, labelled NAME.NAMESPACE as OpenFaaS labels it; and a
// removed function's series leave /metrics with it.
func TestDashboardAndRulesQueryOnlyExportedSeries(t *testing.T) {
	g, _ := inprocGateway(t)
	for _, req := range [][3]string{
		{"POST", "/system/namespace/", `{"name":"staging"}`},
		{"POST", "/system/functions", `{"service":"f","envProcess":"x","namespace":"staging"}`},
	} {
		if code, out := call(t, g, req[0], req[1], req[2]); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", req[0], req[1], code, out)
		}
	}
	for range 3 {
		if code, out := call(t, g, "POST", "/function/f.staging", "x"); code != 200 {
			t.Fatalf("invoke: %d %s", code, out)
		}
	}
	call(t, g, "POST", "/function/nobody", "x") // a refusal, counted by reason
	_, exposition := call(t, g, "GET", "/metrics", "")

	queried := map[string]bool{}
	for _, e := range append(dashboardQueries(t), ruleQueries(t)...) {
		for _, name := range seriesName.FindAllString(e, -1) {
			queried[name] = true
		}
	}
	for _, must := range []string{"gateway_function_invocation_total", "gateway_functions_seconds_bucket",
		"gateway_service_count", "gateway_function_invocation_started"} {
		if !queried[must] {
			t.Errorf("the dashboard does not plot %s", must)
		}
	}
	for name := range queried {
		if !strings.Contains(exposition, "\n"+name+"{") {
			t.Errorf("%s is queried but not in /metrics", name)
		}
	}
	for _, series := range []string{`gateway_function_invocation_total{code="200",function_name="f.staging"} 3`,
		`gateway_function_invocation_started{function_name="f.staging"} 3`,
		`gateway_service_count{function_name="f.staging"}`, `gantry_function_slo_misses_total{function_name="f.staging"} 0`,
		`gantry_request_failures_total{function_name="_unknown",reason="not_found"} 1`} {
		if !strings.Contains(exposition, series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
	if code, out := call(t, g, "DELETE", "/system/functions", `{"functionName":"f.staging"}`); code != 202 {
		t.Fatalf("remove: %d %s", code, out)
	}
	if _, after := call(t, g, "GET", "/metrics", ""); strings.Contains(after, `"f.staging"`) {
		t.Errorf("a removed function's series stay in /metrics:\n%s", grepLines(after, "f.staging"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
