// The test oracle: Karpenter's own requirement algebra and overlay precedence, so the
// watcher's decision engine is judged by the code whose behaviour it claims to follow.
//
// Protocol: one JSON object per line on stdin, one answer per line on stdout.
//   {"overlays":[{"name","weight","requirements":[{key,operator,values}]}],"nodes":[{label:value}]}
//     -> {"winners":["name" | null, ...]}  (per node: the overlay whose price Karpenter applies)
//   {"tables":true}
//     -> {"normalizedLabels":{...},"normalizedLabelValues":{...}}
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

type overlay struct {
	Name         string                             `json:"name"`
	Weight       *int32                             `json:"weight"`
	Requirements []v1alpha1.NodeSelectorRequirement `json:"requirements"`
}

type request struct {
	Tables   bool                `json:"tables"`
	Overlays []overlay           `json:"overlays"`
	Nodes    []map[string]string `json:"nodes"`
}

type decisions struct {
	Winners []*string `json:"winners"`
}

type tables struct {
	NormalizedLabels      map[string]string            `json:"normalizedLabels"`
	NormalizedLabelValues map[string]map[string]string `json:"normalizedLabelValues"`
}

// winners mirrors pkg/controllers/nodeoverlay: overlays in OrderByWeight order, and for each
// instance type the first whose requirements IsCompatible with the instance's sets the price.
func winners(req request) decisions {
	list := v1alpha1.NodeOverlayList{}
	for _, o := range req.Overlays {
		price := "0.00"
		list.Items = append(list.Items, v1alpha1.NodeOverlay{
			ObjectMeta: metav1.ObjectMeta{Name: o.Name},
			Spec:       v1alpha1.NodeOverlaySpec{Requirements: o.Requirements, Weight: o.Weight, Price: &price},
		})
	}
	list.OrderByWeight()
	compiled := lo.Map(list.Items, func(o v1alpha1.NodeOverlay, _ int) scheduling.Requirements {
		return scheduling.NewNodeSelectorRequirements(lo.Map(o.Spec.Requirements, func(r v1alpha1.NodeSelectorRequirement, _ int) corev1.NodeSelectorRequirement {
			return r.AsNodeSelectorRequirement()
		})...)
	})
	out := decisions{Winners: make([]*string, len(req.Nodes))}
	for i, labels := range req.Nodes {
		node := scheduling.NewLabelRequirements(labels)
		for j := range list.Items {
			if node.IsCompatible(compiled[j]) {
				out.Winners[i] = lo.ToPtr(list.Items[j].Name)
				break
			}
		}
	}
	return out
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "karpenter-oracle: bad request: %v\n", err)
			os.Exit(2)
		}
		var answer any = winners(req)
		if req.Tables {
			answer = tables{NormalizedLabels: v1.NormalizedLabels, NormalizedLabelValues: v1.NormalizedLabelValues}
		}
		if err := enc.Encode(answer); err != nil {
			fmt.Fprintf(os.Stderr, "karpenter-oracle: %v\n", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "karpenter-oracle: %v\n", err)
		os.Exit(1)
	}
}
