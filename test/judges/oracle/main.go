// The judge of the decision engine: Karpenter's OWN NodeOverlay controller and instance-type store
// (sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay), driven the way Karpenter drives them, so the
// watcher is judged by the code whose behaviour it claims to follow. Nothing of Karpenter's rules is
// re-implemented here: the overlays and NodePools go into a controller-runtime fake client, the
// controller's Reconcile validates them and writes their statuses, and the store's ApplyAll prices
// each NodePool's instance types, exactly as Karpenter's overlay cloud-provider decorator does.
//
// The same source builds against several Karpenter versions: scripts/control-plane.sh copies it into
// the module of each version (kit/karpenter-build/v1.14.3, v1.15.0; the versions differ only in
// module versions; the one API difference, CloudProvider.Reboot in v1.15, is a method v1.14 ignores).
//
// The AWS provider's apis package is imported for its init(): it registers the karpenter.k8s.aws/*
// keys and topology.k8s.aws/zone-id as well-known and its domains as restricted, as in a real AWS
// Karpenter. Karpenter's pkg/cloudprovider/fake is NOT imported: its init() adds test labels to the
// global well-known set. The cloud provider below returns the request's catalog for every NodePool.
//
// Protocol: one JSON object per line on stdin, one answer per line on stdout.
//
//	{"instanceTypes":[{"name","requirements":[{key,operator,values}],
//	                   "offerings":[{"requirements":[...],"price","available"}],"capacity":{...}}],
//	 "nodePools":[{"name","labels":{...},"requirements":[{key,operator,values,minValues}]}],
//	 "overlays":[{"name","weight","generation","requirements":[...],"price","priceAdjustment","capacity"}],
//	 "launches":[{"nodePool","instanceType","offering"}]}
//	  -> {"applied":["overlay" | null, ...],                      (per launch: whose price the store applied)
//	      "statuses":{"overlay":{"conditions":[{type,status,reason,message,observedGeneration,lastTransitionTime}]}},
//	      "error":"..."}                                           (only when Reconcile failed)
//	{"tables":true}    -> {"normalizedLabels":{...},"normalizedLabelValues":{...}}
//	{"wellKnown":true} -> {"wellKnownLabels":[...],"restrictedLabelDomains":[...]}  (sorted)
//	{"launch":{...}}      -> the AWS provider's launch path (launch_aws.go)
//	{"consolidate":{...}} -> Karpenter's consolidation decision, in two worlds (consolidate.go)
//	{"allocatable":{...}} -> the AWS provider's allocatable per instance type (allocatable_aws.go)
//
// The instance types are used as given: the caller defines their requirements (instance type, zone,
// capacity type, family, ...) as the cloud provider would. To know whose price was applied, every
// overlay that sets price or priceAdjustment gets a distinct absolute price of our own before it is
// created (neither validation nor the conflict logic reads price values); capacity-only overlays
// keep neither. A request the judge cannot understand (bad JSON, unknown NodePool, instance type or
// offering in a launch, duplicate names) ends the process with exit code 2.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"github.com/go-logr/logr"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	controllerruntime "sigs.k8s.io/controller-runtime"

	_ "github.com/aws/karpenter-provider-aws/pkg/apis/v1" // registers the AWS well-known labels (init)

	"sigs.k8s.io/karpenter/pkg/apis"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

type offeringIn struct {
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	Price        float64                          `json:"price"`
	Available    bool                             `json:"available"`
}

type instanceTypeIn struct {
	Name         string                           `json:"name"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
	Offerings    []offeringIn                     `json:"offerings"`
	Capacity     corev1.ResourceList              `json:"capacity"`
	// Overhead: what the kubelet reserves and the eviction threshold, summed (the cloud provider's
	// InstanceTypeOverhead); allocatable is capacity less this. None: allocatable is the capacity.
	Overhead corev1.ResourceList `json:"overhead"`
}

type nodePoolIn struct {
	Name         string                                    `json:"name"`
	Labels       map[string]string                         `json:"labels"`
	Requirements []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
}

type overlayIn struct {
	Name            string                             `json:"name"`
	Weight          *int32                             `json:"weight"`
	Generation      *int64                             `json:"generation"`
	Requirements    []v1alpha1.NodeSelectorRequirement `json:"requirements"`
	Price           *string                            `json:"price"`
	PriceAdjustment *string                            `json:"priceAdjustment"`
	Capacity        corev1.ResourceList                `json:"capacity"`
	// Selected by the watcher's overlaySelector: the launch judge leaves it out of one world.
	Selected bool `json:"selected"`
}

type launchIn struct {
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Offering     int    `json:"offering"`
}

// launchJudge answers {"launch": ...} requests: the AWS provider's launch path (launch_aws.go),
// in the judge of a module that has the AWS provider; nil elsewhere.
var launchJudge func(ctx context.Context, req json.RawMessage) (any, error)

// consolidateJudge answers {"consolidate": ...} requests: Karpenter's consolidation (consolidate.go).
var consolidateJudge func(ctx context.Context, req json.RawMessage) (any, error)

// allocatableJudge answers {"allocatable": ...} requests: the AWS provider's instance type arithmetic
// (allocatable_aws.go), in the judge of a module that has the AWS provider; nil elsewhere.
var allocatableJudge func(ctx context.Context, req json.RawMessage) (any, error)

type request struct {
	Allocatable   json.RawMessage  `json:"allocatable"`
	Launch        json.RawMessage  `json:"launch"`
	Consolidate   json.RawMessage  `json:"consolidate"`
	Tables        bool             `json:"tables"`
	WellKnown     bool             `json:"wellKnown"`
	InstanceTypes []instanceTypeIn `json:"instanceTypes"`
	NodePools     []nodePoolIn     `json:"nodePools"`
	Overlays      []overlayIn      `json:"overlays"`
	Launches      []launchIn       `json:"launches"`
}

type conditionOut struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	ObservedGeneration int64  `json:"observedGeneration"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

type statusOut struct {
	Conditions []conditionOut `json:"conditions"`
}

type answer struct {
	Applied  []*string            `json:"applied"`
	Statuses map[string]statusOut `json:"statuses"`
	Error    string               `json:"error,omitempty"`
}

type tables struct {
	NormalizedLabels      map[string]string            `json:"normalizedLabels"`
	NormalizedLabelValues map[string]map[string]string `json:"normalizedLabelValues"`
}

type wellKnown struct {
	WellKnownLabels        []string `json:"wellKnownLabels"`
	RestrictedLabelDomains []string `json:"restrictedLabelDomains"`
}

// badRequest is a request the judge cannot answer: the caller's bug, not Karpenter's verdict.
type badRequest struct{ error }

// failed maps a judge's error to the protocol's: a bad request exits 2, anything else 1, none 0.
func failed(err error) (string, int) {
	var bad badRequest
	switch {
	case errors.As(err, &bad):
		return fmt.Sprintf("bad request: %v", err), 2
	case err != nil:
		return err.Error(), 1
	}
	return "", 0
}

// The statuses' lastTransitionTime: a fixed clock keeps answers reproducible.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// karpenterScheme holds only the types Karpenter registers in client-go's scheme for its own group
// (NodePool, NodeClaim, NodeOverlay and their lists). The fake client builds a REST mapper of its
// whole scheme on every write, and client-go's ~900 types made that 90% of the judge's time. Its
// type converter is the deduced one, which the fake client falls back to for custom resources
// anyway (the default first builds a full client-go scheme per client).
var karpenterScheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	for _, gv := range scheme.Scheme.PrioritizedVersionsForGroup(apis.Group) {
		metav1.AddToGroupVersion(s, gv)
	}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Group == apis.Group {
			s.AddKnownTypeWithName(gvk, reflect.New(t).Interface().(kruntime.Object))
		}
	}
	return s
}()

// catalog is the cloud provider: the request's instance types, for every NodePool.
type catalog struct{ its []*cloudprovider.InstanceType }

func (c *catalog) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return c.its, nil
}
func (*catalog) Create(context.Context, *v1.NodeClaim) (*v1.NodeClaim, error) {
	return nil, errors.New("not supported")
}
func (*catalog) Delete(context.Context, *v1.NodeClaim) error { return errors.New("not supported") }
func (*catalog) Get(context.Context, string) (*v1.NodeClaim, error) {
	return nil, errors.New("not supported")
}
func (*catalog) List(context.Context) ([]*v1.NodeClaim, error) { return nil, nil }
func (*catalog) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// Reboot is part of the interface from v1.15 on; v1.14 does not ask for it.
func (*catalog) Reboot(context.Context, *v1.NodeClaim, string) error {
	return errors.New("not supported")
}
func (*catalog) RepairPolicies() []cloudprovider.RepairPolicy { return nil }
func (*catalog) Name() string                                 { return "veneer-judge" }
func (*catalog) GetSupportedNodeClasses() []status.Object     { return nil }

func instanceTypes(in []instanceTypeIn) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, 0, len(in))
	for _, it := range in {
		offerings := make(cloudprovider.Offerings, 0, len(it.Offerings))
		for _, o := range it.Offerings {
			offerings = append(offerings, &cloudprovider.Offering{
				Requirements: scheduling.NewNodeSelectorRequirements(o.Requirements...),
				Price:        o.Price,
				Available:    o.Available,
			})
		}
		out = append(out, &cloudprovider.InstanceType{
			Name:         it.Name,
			Requirements: scheduling.NewNodeSelectorRequirements(it.Requirements...),
			Offerings:    offerings,
			Capacity:     it.Capacity,
			Overhead:     &cloudprovider.InstanceTypeOverhead{KubeReserved: it.Overhead},
		})
	}
	return out
}

func judge(ctx context.Context, req request) (answer, error) {
	if err := unique(req); err != nil {
		return answer{}, badRequest{err}
	}
	// Each overlay that sets a price gets a distinct absolute price of our own: the price the store
	// applied names the overlay.
	overlayByPrice := map[float64]string{}
	w, err := reconcileWorld(ctx, req.InstanceTypes, req.NodePools, req.Overlays, func(i int, o overlayIn) (*string, *string) {
		price := strconv.Itoa(1_000_000 + i)
		value, _ := strconv.ParseFloat(price, 64)
		overlayByPrice[value] = o.Name
		return &price, nil
	})
	if err != nil {
		return answer{}, err
	}
	out := answer{Applied: make([]*string, len(req.Launches)), Statuses: w.statuses, Error: w.err}
	if out.Error != "" {
		return out, nil
	}
	store, cp := w.store, w.catalog

	applied := map[string]map[string]*cloudprovider.InstanceType{}
	for _, np := range req.NodePools {
		its, err := store.ApplyAll(np.Name, cp.its)
		if err != nil {
			out.Error = fmt.Sprintf("ApplyAll(%q): %v", np.Name, err)
			return out, nil
		}
		byName := map[string]*cloudprovider.InstanceType{}
		for _, it := range its {
			byName[it.Name] = it
		}
		applied[np.Name] = byName
	}
	for i, l := range req.Launches {
		pool, ok := applied[l.NodePool]
		if !ok {
			return answer{}, badRequest{fmt.Errorf("launch %d: no NodePool %q", i, l.NodePool)}
		}
		it, ok := pool[l.InstanceType]
		if !ok {
			return answer{}, badRequest{fmt.Errorf("launch %d: no instance type %q", i, l.InstanceType)}
		}
		if l.Offering < 0 || l.Offering >= len(it.Offerings) {
			return answer{}, badRequest{fmt.Errorf("launch %d: %s has no offering %d", i, l.InstanceType, l.Offering)}
		}
		offering := it.Offerings[l.Offering]
		if !offering.IsPriceOverlaid() {
			continue
		}
		name, ok := overlayByPrice[offering.Price]
		if !ok {
			return answer{}, fmt.Errorf("launch %d: applied price %v belongs to no overlay", i, offering.Price)
		}
		out.Applied[i] = &name
	}
	return out, nil
}

func unique(req request) error {
	for what, names := range map[string][]string{
		"NodePool":      lo.Map(req.NodePools, func(np nodePoolIn, _ int) string { return np.Name }),
		"overlay":       lo.Map(req.Overlays, func(o overlayIn, _ int) string { return o.Name }),
		"instance type": lo.Map(req.InstanceTypes, func(it instanceTypeIn, _ int) string { return it.Name }),
	} {
		if dup := lo.FindDuplicates(names); len(dup) > 0 {
			return fmt.Errorf("%s %q appears more than once", what, dup[0])
		}
	}
	return nil
}

func sorted(s interface{ UnsortedList() []string }) []string {
	list := s.UnsortedList()
	slices.Sort(list)
	return list
}

// reply answers one request line: the JSON answer, or a message and the exit code to die with.
func reply(ctx context.Context, line []byte) (out []byte, message string, code int) {
	// Karpenter's code trusts what its webhooks and cloud providers let through (e.g. an instance
	// type's Gt requirement without a value): a panic is a request the judge cannot answer.
	defer func() {
		if p := recover(); p != nil {
			if os.Getenv("VENEER_JUDGE_TRACE") != "" {
				os.Stderr.Write(debug.Stack())
			}
			out, message, code = nil, fmt.Sprintf("bad request: Karpenter panicked: %v", p), 2
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Sprintf("bad request: %v", err), 2
	}
	var answer any
	switch {
	case req.Tables:
		answer = tables{NormalizedLabels: v1.NormalizedLabels, NormalizedLabelValues: v1.NormalizedLabelValues}
	case req.Launch != nil:
		if launchJudge == nil {
			return nil, "bad request: this judge was built without the AWS provider's launch code", 2
		}
		a, err := launchJudge(ctx, req.Launch)
		if message, code := failed(err); code != 0 {
			return nil, message, code
		}
		answer = a
	case req.Allocatable != nil:
		if allocatableJudge == nil {
			return nil, "bad request: this judge was built without the AWS provider", 2
		}
		a, err := allocatableJudge(ctx, req.Allocatable)
		if message, code := failed(err); code != 0 {
			return nil, message, code
		}
		answer = a
	case req.Consolidate != nil:
		a, err := consolidateJudge(ctx, req.Consolidate)
		if message, code := failed(err); code != 0 {
			return nil, message, code
		}
		answer = a
	case req.WellKnown:
		answer = wellKnown{WellKnownLabels: sorted(v1.WellKnownLabels), RestrictedLabelDomains: sorted(v1.RestrictedLabelDomains)}
	default:
		a, err := judge(ctx, req)
		if message, code := failed(err); code != 0 {
			return nil, message, code
		}
		if a.Error != "" {
			fmt.Fprintf(os.Stderr, "karpenter-oracle: Reconcile: %s\n", a.Error)
		}
		answer = a
	}
	out, err := json.Marshal(answer)
	if err != nil {
		return nil, err.Error(), 1
	}
	return append(out, '\n'), "", 0
}

type result struct {
	seq     int
	out     []byte
	message string
	code    int
}

// main answers requests on all cores (every case is independent: its own client, store and
// controller, several at once per core) and writes the answers in request order.
func main() {
	// VENEER_JUDGE_CPUPROFILE=FILE: where the judge's time goes (go tool pprof -top BINARY FILE).
	if path := os.Getenv("VENEER_JUDGE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	controllerruntime.SetLogger(logr.Discard())
	ctx := controllerruntime.LoggerInto(context.Background(), logr.Discard())
	type job struct {
		seq  int
		line []byte
	}
	jobs := make(chan job, 64)
	results := make(chan result, 64)
	var workers sync.WaitGroup
	// A launch request spends most of its time in CreateFleet's batching window, not on a core:
	// more requests than cores are worked on at once.
	for range 4 * runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for j := range jobs {
				out, message, code := reply(ctx, j.line)
				results <- result{seq: j.seq, out: out, message: message, code: code}
			}
		})
	}
	var readErr error
	go func() {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 0, 1<<20), 256<<20)
		for seq := 0; in.Scan(); seq++ {
			jobs <- job{seq: seq, line: bytes.Clone(in.Bytes())}
		}
		readErr = in.Err()
		close(jobs)
		workers.Wait()
		close(results)
	}()

	out := bufio.NewWriter(os.Stdout)
	pending := map[int]result{}
	next := 0
	for r := range results {
		pending[r.seq] = r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if r.code != 0 {
				out.Flush()
				fmt.Fprintf(os.Stderr, "karpenter-oracle: %s\n", r.message)
				os.Exit(r.code)
			}
			if _, err := out.Write(r.out); err != nil {
				os.Exit(1)
			}
		}
		// Flush when nothing else is ready: answers go out as soon as they are known.
		if len(results) == 0 {
			if err := out.Flush(); err != nil {
				os.Exit(1)
			}
		}
	}
	if err := out.Flush(); err != nil {
		os.Exit(1)
	}
	if readErr != nil {
		fmt.Fprintf(os.Stderr, "karpenter-oracle: %v\n", readErr)
		os.Exit(1)
	}
}
