package scaleout

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestShareTargets(t *testing.T) {
	for _, tc := range []struct {
		demand []int
		slots  int
		want   []int
	}{
		{[]int{0, 0}, 2, []int{1, 1}},
		{[]int{0, 0}, 1, []int{1, 0}},
		{[]int{0, 0, 0}, 4, []int{2, 1, 1}},
		{[]int{10, 1}, 2, []int{1, 1}}, // one each before proportion
		{[]int{10, 0}, 4, []int{4, 0}},
		{[]int{1, 3}, 8, []int{3, 5}}, // 1+1 each, then 1.5 and 4.5: the tie to the first
		{[]int{5, 5, 5}, 1, []int{1, 0, 0}},
		{[]int{0, 7}, 3, []int{0, 3}},
		{[]int{3}, 0, []int{0}},
	} {
		got := shareTargets(tc.demand, tc.slots)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("shareTargets(%v, %d) = %v, want %v", tc.demand, tc.slots, got, tc.want)
		}
	}
	// Whatever the demand, every slot goes to someone, once.
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		demand := make([]int, 1+r.IntN(6))
		for i := range demand {
			if r.IntN(3) > 0 {
				demand[i] = r.IntN(50)
			}
		}
		slots := r.IntN(40)
		got := shareTargets(demand, slots)
		if sum(got) != slots {
			t.Fatalf("shareTargets(%v, %d) = %v hands out %d", demand, slots, got, sum(got))
		}
		for i := range got {
			if got[i] < 0 || sum(demand) > 0 && demand[i] == 0 && got[i] > 0 {
				t.Fatalf("shareTargets(%v, %d) = %v", demand, slots, got)
			}
		}
	}
}
