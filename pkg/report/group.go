package report

import "fmt"

// Group is the runs of every policy under one condition: the same app,
// input-size distribution, trace and scale.
type Group struct {
	App, Dist, Trace, Scale string
	Runs                    []Record
}

// Key is a file-name-safe identifier of the group's condition.
func (g Group) Key() string {
	k := fmt.Sprintf("%s_%s_%s", g.App, g.Dist, g.Trace)
	if g.Scale != "" {
		k += "_" + g.Scale
	}
	return k
}

// Title names the condition for people.
func (g Group) Title() string {
	t := fmt.Sprintf("%s · %s · %s", g.App, g.Dist, g.Trace)
	if g.Scale != "" {
		t += " · " + g.Scale + " scale"
	}
	return t
}

// Policy returns the run of the named policy, if the group has one.
func (g Group) Policy(name string) (Record, bool) {
	for _, r := range g.Runs {
		if r.Policy == name {
			return r, true
		}
	}
	return Record{}, false
}

// GroupRecords splits records by condition, keeping first-seen order.
func GroupRecords(records []Record) []Group {
	var groups []Group
	index := map[[4]string]int{}
	for _, r := range records {
		k := [4]string{r.App, r.Dist, r.Trace, r.Scale}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, Group{App: r.App, Dist: r.Dist, Trace: r.Trace, Scale: r.Scale})
		}
		groups[i].Runs = append(groups[i].Runs, r)
	}
	return groups
}
